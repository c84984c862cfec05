/*
 * embedded.h - files built into the binary (tools/embed.c writes them at
 * build time; meson.build lists which): each is its bytes with a NUL after
 * them, and their length without it.
 */
#ifndef MCPC_EMBEDDED_H
#define MCPC_EMBEDDED_H

#include <stddef.h>

/* The live page (src/app/ui/): served at /ui, /ui/app.js, /ui/app.css. */
extern const unsigned char ui_index_html[];
extern const size_t ui_index_html_len;
extern const unsigned char ui_app_js[];
extern const size_t ui_app_js_len;
extern const unsigned char ui_app_css[];
extern const size_t ui_app_css_len;

/* docs/mcp-chain.schema.json: the configuration's JSON Schema (mcp-chain schema). */
extern const unsigned char config_schema_json[];
extern const size_t config_schema_json_len;

#endif
