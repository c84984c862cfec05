/*
 * fuzz_config.c - libFuzzer target for src/core/config.c and every
 * middleware module's option parser (pipeline_build through the module
 * registry): any text loads into a config or into error lines, and both
 * free cleanly. Nothing is started (no file is opened for writing, no
 * program spawned: modules do that in their start hook).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "log.h"
#include "middleware.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

#define CHECK(cond) do { if (!(cond)) { \
	fprintf(stderr, "fuzz_config: line %d: %s\n", __LINE__, #cond); abort(); } } while (0)

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	mw_use_registry(mw_registry);
	log_set_level(LOG_ERROR);
	json_object_seed(1);
	setenv("FUZZ_VAR", "value", 1);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1);
	CHECK(text);
	memcpy(text, data, size);
	text[size] = '\0';
	struct cfg_errors errs = { 0 };
	struct cfg *c = cfg_load_string(text, "fuzz.json", &errs);
	if (c) {
		CHECK(errs.count == 0);
		for (size_t i = 0; i < c->nservers; i++)
			CHECK(c->servers[i].name && c->servers[i].pipeline);
		CHECK(c->pipeline);
		cfg_free(c);
	} else {
		CHECK(errs.count > 0);
		for (size_t i = 0; i < errs.count; i++)
			CHECK(errs.lines[i] && strncmp(errs.lines[i], "fuzz.json", 9) == 0);
	}
	cfg_errors_release(&errs);
	free(text);
	return 0;
}
