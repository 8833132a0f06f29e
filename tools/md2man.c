/* md2man: turns one of the project's command pages (docs/cli/<tool>.md, docs/pptrain.md) into a
 * man(7) page, at build time, so that `man pprof-tune` says what the docs say (issue 20).
 *
 *   md2man NAME VERSION IN.md OUT.1
 *
 * The Markdown the docs use, and nothing more: "# title" (the page's name; its first paragraph
 * becomes NAME's one-line description and opens DESCRIPTION), "##"/"###" headings (.SH/.SS),
 * paragraphs, "- " and "1. " lists with indented continuation lines, fenced code blocks (.nf),
 * tables (each row a tagged paragraph: the first cell the tag, the other cells after it, labelled
 * by their column headers when there are more than two), and inline `code`, **bold**, *italic*,
 * [links](url) and images (their alt text). Whatever else is passed through as text, escaped. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { LINE_MAX_BYTES = 8192, MAX_CELLS = 16 };

static FILE *g_out;

/* One character of text, escaped for roff: a backslash, a minus sign (ASCII minus, so that
 * options copied from the page work), the rest as is. */
static void put_char(int c)
{
    if (c == '\\')
        fputs("\\e", g_out);
    else if (c == '-')
        fputs("\\-", g_out);
    else
        fputc(c, g_out);
}

/* Inline markup of s[0..n) to roff, escaped. */
static void put_inline(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == '`') { /* a code span: bold, its content literal */
            const char *end = memchr(s + i + 1, '`', n - i - 1);
            if (end) {
                fputs("\\fB", g_out);
                for (const char *p = s + i + 1; p < end; p++)
                    put_char(*p);
                fputs("\\fR", g_out);
                i = (size_t)(end - s);
                continue;
            }
        } else if (c == '*' && i + 1 < n && s[i + 1] == '*') { /* **bold** */
            const char *end = i + 2 < n ? strstr(s + i + 2, "**") : NULL;
            if (end && end < s + n && end > s + i + 2) {
                fputs("\\fB", g_out);
                put_inline(s + i + 2, (size_t)(end - s) - i - 2);
                fputs("\\fR", g_out);
                i = (size_t)(end - s) + 1;
                continue;
            }
        } else if ((c == '*' || c == '_') && i + 1 < n && !isspace((unsigned char)s[i + 1]) &&
                   (i == 0 || !isalnum((unsigned char)s[i - 1]))) { /* *italic* or _italic_ */
            const char *end = memchr(s + i + 1, c, n - i - 1);
            if (end && !isspace((unsigned char)end[-1]) &&
                (end + 1 >= s + n || !isalnum((unsigned char)end[1]))) {
                fputs("\\fI", g_out);
                put_inline(s + i + 1, (size_t)(end - s) - i - 1);
                fputs("\\fR", g_out);
                i = (size_t)(end - s);
                continue;
            }
        } else if (c == '[' || (c == '!' && i + 1 < n && s[i + 1] == '[')) { /* [text](url) */
            size_t open = c == '!' ? i + 1 : i;
            const char *close = memchr(s + open, ']', n - open);
            if (close && close + 1 < s + n && close[1] == '(') {
                const char *rp = memchr(close, ')', (size_t)(s + n - close));
                if (rp) {
                    put_inline(s + open + 1, (size_t)(close - s) - open - 1);
                    i = (size_t)(rp - s);
                    continue;
                }
            }
        }
        put_char(c);
    }
}

/* A line of text at the start of a roff line, after a zero-width \& so that a leading '.' or
 * '\'' (also one a link's text brings there) is text, not a request. */
static void put_text_line(const char *s, size_t n)
{
    fputs("\\&", g_out);
    put_inline(s, n);
    fputc('\n', g_out);
}

static size_t trim_len(const char *s)
{
    size_t n = strlen(s);
    while (n && (s[n - 1] == '\n' || s[n - 1] == '\r' || s[n - 1] == ' ' || s[n - 1] == '\t'))
        n--;
    return n;
}

static const char *skip_spaces(const char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    return s;
}

/* The cells of a table row "| a | b |" (pipes inside code spans kept); returns how many. */
static int split_row(char *s, char **cells, int cap)
{
    int n = 0, in_code = 0;
    char *p = (char *)skip_spaces(s);
    if (*p == '|')
        p++;
    char *start = p;
    for (; *p; p++) {
        if (*p == '`')
            in_code = !in_code;
        else if (*p == '\\' && p[1] == '|')
            memmove(p, p + 1, strlen(p)); /* an escaped pipe is text */
        else if (*p == '|' && !in_code) {
            *p = '\0';
            if (n < cap)
                cells[n++] = (char *)skip_spaces(start);
            start = p + 1;
        }
    }
    if (*skip_spaces(start) && n < cap)
        cells[n++] = (char *)skip_spaces(start);
    for (int i = 0; i < n; i++) {
        size_t l = strlen(cells[i]);
        while (l && (cells[i][l - 1] == ' ' || cells[i][l - 1] == '\n'))
            cells[i][--l] = '\0';
    }
    return n;
}

static int is_separator_row(const char *s)
{
    s = skip_spaces(s);
    if (*s != '|')
        return 0;
    for (; *s; s++)
        if (!strchr("|-: \t\r\n", *s))
            return 0;
    return 1;
}

/* The page's one-line description: the first sentence of its first paragraph, without markup. */
static void put_name_line(const char *name, const char *para)
{
    fprintf(g_out, ".SH NAME\n%s \\- ", name);
    size_t n = strlen(para);
    const char *stop = strstr(para, ". ");
    if (stop && (size_t)(stop - para) < n)
        n = (size_t)(stop - para);
    const char *colon = strstr(para, ": ");
    if (colon && (size_t)(colon - para) < n)
        n = (size_t)(colon - para);
    for (size_t i = 0; i < n; i++)
        if (para[i] != '`' && para[i] != '*')
            put_char(para[i] == '\n' ? ' ' : para[i]);
    fputc('\n', g_out);
}

static void upper_heading(const char *s, size_t n)
{
    fputs(".SH \"", g_out);
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '"' || s[i] == '`')
            continue;
        unsigned char c = (unsigned char)s[i];
        put_char(c < 0x80 ? toupper(c) : c);
    }
    fputs("\"\n", g_out);
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: md2man NAME VERSION IN.md OUT.1\n");
        return 2;
    }
    const char *name = argv[1], *version = argv[2];
    FILE *in = fopen(argv[3], "r");
    if (!in) {
        perror(argv[3]);
        return 2;
    }
    g_out = fopen(argv[4], "w");
    if (!g_out) {
        perror(argv[4]);
        fclose(in);
        return 3;
    }
    char upper[64];
    size_t k = 0;
    for (; name[k] && k + 1 < sizeof upper; k++)
        upper[k] = (char)toupper((unsigned char)name[k]);
    upper[k] = '\0';
    fprintf(g_out, ".\\\" generated from %s by md2man (tools/md2man.c): edit the Markdown\n",
            argv[3]);
    fprintf(g_out, ".TH %s 1 \"\" \"pipeprof %s\" \"pipeprof manual\"\n", upper, version);

    static char line[LINE_MAX_BYTES], first_para[LINE_MAX_BYTES];
    /* 0 before the title's first paragraph, 1 collecting it, 2 after it */
    int state = 0, in_code = 0, in_table = 0, table_cols = 0;
    char header[MAX_CELLS][128];
    size_t fp_len = 0;
    while (fgets(line, sizeof line, in)) {
        size_t n = trim_len(line);
        line[n] = '\0';
        if (state < 2) { /* the title, then its first paragraph: NAME */
            if (!strncmp(line, "# ", 2))
                continue;
            if (n == 0 && state == 0)
                continue;
            if (n && strncmp(line, "#", 1) && strncmp(line, "```", 3) && line[0] != '|') {
                state = 1;
                if (fp_len + n + 2 < sizeof first_para) {
                    if (fp_len)
                        first_para[fp_len++] = ' ';
                    memcpy(first_para + fp_len, line, n);
                    fp_len += n;
                    first_para[fp_len] = '\0';
                }
                continue;
            }
            put_name_line(name, first_para);
            fputs(".SH DESCRIPTION\n", g_out);
            if (fp_len)
                put_text_line(first_para, fp_len);
            state = 2;
            if (n == 0)
                continue;
        }
        if (!strncmp(skip_spaces(line), "```", 3)) {
            fputs(in_code ? ".fi\n.RE\n" : ".PP\n.RS 4\n.nf\n", g_out);
            in_code = !in_code;
            continue;
        }
        if (in_code) { /* inline markup means nothing here: only escapes */
            fputs("\\&", g_out);
            for (size_t i = 0; i < n; i++)
                put_char(line[i]);
            fputc('\n', g_out);
            continue;
        }
        if (line[0] == '|' || (in_table && *skip_spaces(line) == '|')) {
            char *cells[MAX_CELLS];
            if (is_separator_row(line))
                continue;
            int c = split_row(line, cells, MAX_CELLS);
            if (!in_table) { /* the header row */
                in_table = 1;
                table_cols = c;
                for (int i = 0; i < c; i++)
                    snprintf(header[i], sizeof header[i], "%s", cells[i]);
                continue;
            }
            fputs(".TP\n", g_out);
            put_text_line(c ? cells[0] : "", c ? strlen(cells[0]) : 0);
            for (int i = 1; i < c; i++) {
                if (!cells[i][0])
                    continue;
                if (table_cols > 2 && i < table_cols && header[i][0]) {
                    fputs("\\fI", g_out);
                    put_inline(header[i], strlen(header[i]));
                    fputs("\\fR: ", g_out);
                }
                put_text_line(cells[i], strlen(cells[i]));
                if (i + 1 < c)
                    fputs(".br\n", g_out);
            }
            continue;
        }
        in_table = 0;
        if (n == 0) {
            fputs(".PP\n", g_out);
            continue;
        }
        if (!strncmp(line, "## ", 3)) {
            upper_heading(line + 3, n - 3);
            continue;
        }
        if (!strncmp(line, "### ", 4) || !strncmp(line, "#### ", 5)) {
            const char *h = line[3] == ' ' ? line + 4 : line + 5;
            fputs(".SS \"", g_out);
            for (const char *p = h; *p; p++)
                if (*p != '"' && *p != '`')
                    put_char(*p);
            fputs("\"\n", g_out);
            continue;
        }
        const char *t = skip_spaces(line);
        if ((t[0] == '-' || t[0] == '*') && t[1] == ' ') { /* a bullet */
            fputs(".IP \\(bu 2\n", g_out);
            put_text_line(t + 2, strlen(t + 2));
            continue;
        }
        const char *d = t;
        while (isdigit((unsigned char)*d))
            d++;
        if (d > t && d[0] == '.' && d[1] == ' ') { /* a numbered item */
            fprintf(g_out, ".IP %.*s. 4\n", (int)(d - t), t);
            put_text_line(d + 2, strlen(d + 2));
            continue;
        }
        put_text_line(t, strlen(t));
    }
    if (state < 2) /* a page that is only a title and a paragraph */
        put_name_line(name, first_para);
    if (in_code)
        fputs(".fi\n.RE\n", g_out);
    fprintf(g_out, ".SH SEE ALSO\nThe pipeprof documentation (share/doc/pipeprof), whose %s this "
                   "page is.\n",
            strrchr(argv[3], '/') ? strrchr(argv[3], '/') + 1 : argv[3]);
    int bad = ferror(in) || ferror(g_out);
    fclose(in);
    if (fclose(g_out) != 0 || bad) {
        fprintf(stderr, "md2man: writing %s failed\n", argv[4]);
        return 3;
    }
    return 0;
}
