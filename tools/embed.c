/*
 * embed.c - a build tool: writes a C file holding files' bytes, so that
 * mcp-chain serves its page and prints its schema from the binary alone.
 *
 *   mcp-embed OUT.c SYMBOL FILE [SYMBOL FILE ...]
 *
 * For each pair, OUT.c defines
 *   const unsigned char SYMBOL[];   the file's bytes and a NUL after them
 *   const size_t SYMBOL_len;        its length, without that NUL
 * include/embedded.h declares the ones mcp-chain uses.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Writes FILE's bytes as SYMBOL to OUT; 0, or -1 (said on stderr). */
static int embed(FILE *out, const char *symbol, const char *path)
{
	FILE *in = fopen(path, "rb");
	if (!in) {
		perror(path);
		return -1;
	}
	fprintf(out, "const unsigned char %s[] = {", symbol);
	size_t n = 0;
	int ch;
	while ((ch = getc(in)) != EOF)
		fprintf(out, "%s%u,", n++ % 16 ? "" : "\n\t", (unsigned)ch);
	int bad = ferror(in);
	fclose(in);
	if (bad) {
		perror(path);
		return -1;
	}
	fprintf(out, "\n\t0\n};\nconst size_t %s_len = %zu;\n\n", symbol, n);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 4 || argc % 2) {
		fprintf(stderr, "usage: mcp-embed OUT.c SYMBOL FILE [SYMBOL FILE ...]\n");
		return 2;
	}
	FILE *out = fopen(argv[1], "w");
	if (!out) {
		perror(argv[1]);
		return 1;
	}
	fprintf(out, "/* Made by tools/embed.c from the files named below; not to edit. */\n"
		     "#include <stddef.h>\n\n");
	int rc = 0;
	for (int i = 2; i < argc && rc == 0; i += 2) {
		fprintf(out, "/* %s */\n", argv[i + 1]);
		rc = embed(out, argv[i], argv[i + 1]);
	}
	if (fclose(out) != 0 || rc != 0) {
		remove(argv[1]);
		return 1;
	}
	return 0;
}
