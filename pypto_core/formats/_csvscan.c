/* Kernel-table CSV scanner: the hot loop of pypto_core.formats.kernel_csv (kernel_details.csv, op_summary).
 *
 * Why C: Arrow's CSV reader costs ~1 CPU-second per 100 MB on the 2-core target machine (readers_csv
 * bench), most of it building one string per cell. This scanner does one pass over the bytes and writes
 * typed columns directly: exact int64 ns times, int64 ids, float64 counters (each with a validity bitmap),
 * and for text columns int32 codes into a per-batch dictionary, so Python only sees the distinct strings.
 *
 * It accepts a strict subset of what the validating path (pyarrow.csv, all columns as text, then
 * csvtable.to_ns / to_int / to_float) accepts, and gives the same values for it:
 *   - RFC 4180 quoting (a quoted field may hold ',' and doubled quotes, as shape cells do); line ends LF,
 *     CRLF or a lone CR (as Arrow); empty lines skipped (as Arrow's ignore_empty_lines);
 *   - numeric cells trimmed of spaces/TABs and surrounding quotes (the TAB after times, FORMATS.md §0.2),
 *     null for the caller's null tokens (N/A, empty, ...; FORMATS.md §0.4); ints equal to 4294967295 null;
 *   - times: [-]d{1,16}[.d*] µs -> ns exactly (3 digits kept, the 4th rounds half up, sign applied
 *     after: the string path's rule), never through a double (FORMATS.md §0.1);
 *   - floats: correctly rounded (Clinger's exact fast path, else strtod_l in the C locale).
 * Anything else (a row with the wrong number of fields, a quote inside an unquoted field or text after a
 * closing quote, a newline inside quotes, a number it does not read, an out-of-range value) stops the scan
 * with ST_BAIL: the caller then reads the file the validating way, so warnings and errors stay the same.
 * Built with `cc -O2 -shared -fPIC`; loaded with ctypes (which releases the GIL during the call).
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__GLIBC__)
#include <locale.h>
#endif
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* column kinds (kernel_csv._NATIVE_KINDS) */
#define K_TEXT 1
#define K_TIME 2
#define K_INT 3
#define K_FLOAT 4

/* status codes written to status[0] */
#define ST_NEED_MORE 1 /* input ended inside a row (not at EOF); consumed = start of that row */
#define ST_DONE 2      /* at EOF and everything consumed */
#define ST_FULL 3      /* max_rows rows written */
#define ST_BAIL 4      /* a row this scanner does not take; status[2] = its byte offset, status[3] = reason */

#define MAX_COLS 4096
#define UINT32_NONE 4294967295LL

typedef struct {
    /* dictionary of one text column: strings back to back, int32 offsets, open-addressing hash of codes */
    uint8_t *data;
    int64_t data_len, data_cap;
    int32_t *offsets; /* count + 1 */
    uint32_t *hashes; /* per code */
    int32_t count, cap;
    uint64_t *slots; /* hash << 32 | (code + 1); 0 = empty */
    int32_t nslots;
    int32_t last; /* the previous row's code: low-cardinality columns repeat it; -1 none */
} Dict;

typedef struct {
    int32_t ncols;
    int8_t *kinds;
    Dict *dicts;
    /* null tokens, each followed by "\0" */
    uint8_t *nulls;
    int64_t nulls_len;
    uint8_t *scratch; /* unquoting buffer for cells with doubled quotes */
    int64_t scratch_cap;
    int64_t *fstart, *flen; /* field spans of the current row */
    uint8_t *fesc;
} Scanner;

static void dict_reset(Dict *d) {
    d->data_len = 0;
    d->count = 0;
    d->offsets[0] = 0;
    d->last = -1;
    memset(d->slots, 0, sizeof(uint64_t) * (size_t)d->nslots);
}

static int dict_init(Dict *d) {
    d->data_cap = 1 << 16;
    d->cap = 1024;
    d->nslots = 2048;
    d->data = malloc((size_t)d->data_cap);
    d->offsets = malloc(sizeof(int32_t) * (size_t)(d->cap + 1));
    d->hashes = malloc(sizeof(uint32_t) * (size_t)d->cap);
    d->slots = calloc((size_t)d->nslots, sizeof(uint64_t));
    if (!d->data || !d->offsets || !d->hashes || !d->slots) return -1;
    dict_reset(d);
    return 0;
}

static void dict_free(Dict *d) {
    free(d->data);
    free(d->offsets);
    free(d->hashes);
    free(d->slots);
}

static inline uint32_t hash_bytes(const uint8_t *p, int64_t n) {
    /* FNV-1a on 8-byte words, then a final mix: cells are short and repeat; speed matters, not quality */
    uint64_t h = 1469598103934665603ULL ^ (uint64_t)n;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        h = (h ^ w) * 1099511628211ULL;
        h ^= h >> 29;
    }
    if (i < n) {
        uint64_t w = 0;
        memcpy(&w, p + i, (size_t)(n - i));
        h = (h ^ w) * 1099511628211ULL;
    }
    h ^= h >> 32;
    h *= 0x9E3779B97F4A7C15ULL;
    return (uint32_t)(h >> 32);
}

static int dict_grow_slots(Dict *d) {
    int32_t ns = d->nslots * 2;
    uint64_t *slots = calloc((size_t)ns, sizeof(uint64_t));
    if (!slots) return -1;
    for (int32_t c = 0; c < d->count; c++) {
        uint32_t i = d->hashes[c] & (uint32_t)(ns - 1);
        while (slots[i]) i = (i + 1) & (uint32_t)(ns - 1);
        slots[i] = (uint64_t)d->hashes[c] << 32 | (uint32_t)(c + 1);
    }
    free(d->slots);
    d->slots = slots;
    d->nslots = ns;
    return 0;
}

/* the code of string p[0:n] in d, adding it when new; -1 when out of memory or the dictionary is too big */
static int32_t dict_intern(Dict *d, const uint8_t *p, int64_t n) {
    if (d->last >= 0) {
        int32_t c = d->last;
        if (d->offsets[c + 1] - d->offsets[c] == n && memcmp(d->data + d->offsets[c], p, (size_t)n) == 0) return c;
    }
    uint32_t h = hash_bytes(p, n);
    uint32_t mask = (uint32_t)(d->nslots - 1);
    uint32_t i = h & mask;
    for (;;) {
        uint64_t s = d->slots[i];
        if (!s) break;
        int32_t c = (int32_t)(uint32_t)s - 1;
        if ((uint32_t)(s >> 32) == h && d->offsets[c + 1] - d->offsets[c] == n &&
            memcmp(d->data + d->offsets[c], p, (size_t)n) == 0)
            return d->last = c;
        i = (i + 1) & mask;
    }
    if (d->data_len + n > INT32_MAX) return -1; /* int32 offsets */
    if (d->count + 1 >= d->cap) {
        int32_t cap = d->cap * 2;
        int32_t *off = realloc(d->offsets, sizeof(int32_t) * (size_t)(cap + 1));
        if (!off) return -1;
        d->offsets = off;
        uint32_t *hs = realloc(d->hashes, sizeof(uint32_t) * (size_t)cap);
        if (!hs) return -1;
        d->hashes = hs;
        d->cap = cap;
    }
    if (d->data_len + n > d->data_cap) {
        int64_t cap = d->data_cap;
        while (cap < d->data_len + n) cap *= 2;
        uint8_t *data = realloc(d->data, (size_t)cap);
        if (!data) return -1;
        d->data = data;
        d->data_cap = cap;
    }
    int32_t c = d->count++;
    memcpy(d->data + d->data_len, p, (size_t)n);
    d->data_len += n;
    d->offsets[c + 1] = (int32_t)d->data_len;
    d->hashes[c] = h;
    d->slots[i] = (uint64_t)h << 32 | (uint32_t)(c + 1);
    if ((int64_t)d->count * 2 > d->nslots && dict_grow_slots(d) != 0) return -1;
    return d->last = c;
}

/* offset of the first ',', '"', CR or LF in b[p:n], or n */
static inline int64_t field_end(const uint8_t *b, int64_t p, int64_t n) {
#if defined(__SSE2__)
    const __m128i comma = _mm_set1_epi8(','), quote = _mm_set1_epi8('"'), cr = _mm_set1_epi8('\r'),
                  lf = _mm_set1_epi8('\n');
    while (p + 16 <= n) {
        __m128i v = _mm_loadu_si128((const __m128i *)(b + p));
        __m128i m = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, comma), _mm_cmpeq_epi8(v, quote)),
                                 _mm_or_si128(_mm_cmpeq_epi8(v, cr), _mm_cmpeq_epi8(v, lf)));
        int bits = _mm_movemask_epi8(m);
        if (bits) return p + __builtin_ctz((unsigned)bits);
        p += 16;
    }
#endif
    while (p < n && b[p] != ',' && b[p] != '"' && b[p] != '\n' && b[p] != '\r') p++;
    return p;
}

/* ------------------------------------------------------------------------------------------- numbers */

static inline int is_blank(uint8_t c) { return c == ' ' || c == '\t'; }

/* the string path's cleaning for numeric cells: whitespace, then quotes, then whitespace (csvtable.clean_strings);
 * only ASCII space/TAB are trimmed here: other whitespace leaves a cell this scanner refuses (the caller's
 * path handles it) */
static inline void trim_cell(const uint8_t **pp, int64_t *pn) {
    const uint8_t *p = *pp;
    int64_t n = *pn;
    while (n && is_blank(p[0])) p++, n--;
    while (n && is_blank(p[n - 1])) n--;
    while (n && p[0] == '"') p++, n--;
    while (n && p[n - 1] == '"') n--;
    while (n && is_blank(p[0])) p++, n--;
    while (n && is_blank(p[n - 1])) n--;
    *pp = p;
    *pn = n;
}

static int is_null_token(const Scanner *s, const uint8_t *p, int64_t n) {
    const uint8_t *t = s->nulls;
    const uint8_t *end = s->nulls + s->nulls_len;
    while (t < end) {
        int64_t tl = (int64_t)strlen((const char *)t);
        if (tl == n && memcmp(t, p, (size_t)n) == 0) return 1;
        t += tl + 1;
    }
    return 0;
}

/* [-]d{1,16}[.d*] µs -> ns; 0 ok, -1 not this grammar or out of range */
static int parse_time_ns(const uint8_t *p, int64_t n, int64_t *out) {
    int64_t i = 0;
    int neg = 0;
    if (i < n && p[i] == '-') neg = 1, i++;
    int64_t d0 = i;
    int64_t whole = 0;
    while (i < n && p[i] >= '0' && p[i] <= '9') whole = whole * 10 + (p[i++] - '0');
    int64_t nd = i - d0;
    if (nd < 1 || nd > 16) return -1;
    int64_t frac = 0, fd = 0;
    int up = 0;
    if (i < n && p[i] == '.') {
        i++;
        while (i < n && p[i] >= '0' && p[i] <= '9') {
            if (fd < 3) frac = frac * 10 + (p[i] - '0');
            else if (fd == 3) up = p[i] >= '5';
            fd++, i++;
        }
    }
    if (i != n) return -1;
    while (fd < 3) frac *= 10, fd++;
    /* whole <= 9999999999999999: whole * 1000 + 999 + 1 may exceed INT64_MAX */
    if (whole > (INT64_MAX - 1000) / 1000) return -1;
    int64_t v = whole * 1000 + frac + up;
    *out = neg ? -v : v;
    return 0;
}

/* [-]d{1,18}[.0*] -> int64; 0 ok, -1 not this grammar */
static int parse_int(const uint8_t *p, int64_t n, int64_t *out) {
    int64_t i = 0;
    int neg = 0;
    if (i < n && p[i] == '-') neg = 1, i++;
    int64_t d0 = i;
    int64_t v = 0;
    while (i < n && p[i] >= '0' && p[i] <= '9') v = v * 10 + (p[i++] - '0');
    int64_t nd = i - d0;
    if (nd < 1 || nd > 18) return -1;
    if (i < n && p[i] == '.') {
        i++;
        while (i < n && p[i] == '0') i++;
    }
    if (i != n) return -1;
    *out = neg ? -v : v;
    return 0;
}

static const double POW10[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                                 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

#if defined(__GLIBC__)
static locale_t c_locale(void) {
    static locale_t loc = (locale_t)0;
    if (loc == (locale_t)0) loc = newlocale(LC_ALL_MASK, "C", (locale_t)0);
    return loc;
}
#endif

/* [-](d+[.d*]|.d+)[(e|E)[+-]d+] -> double, correctly rounded; 0 ok, -1 not read (grammar, range, rare form) */
static int parse_float_general(const uint8_t *p, int64_t n, double *out) {
    int64_t i = 0;
    int neg = 0;
    if (i < n && p[i] == '-') neg = 1, i++;
    uint64_t mant = 0;
    int sig = 0;      /* significant digits in mant */
    int dropped = 0;  /* significant digits beyond 19 (then strtod) */
    int64_t e10 = 0;
    int64_t nd = 0;
    while (i < n && p[i] >= '0' && p[i] <= '9') {
        if (mant || p[i] != '0') {
            if (sig < 19) mant = mant * 10 + (uint64_t)(p[i] - '0'), sig++;
            else dropped++, e10++;
        }
        i++, nd++;
    }
    if (i < n && p[i] == '.') {
        i++;
        while (i < n && p[i] >= '0' && p[i] <= '9') {
            if (mant || p[i] != '0') {
                if (sig < 19) mant = mant * 10 + (uint64_t)(p[i] - '0'), sig++, e10--;
                else dropped++;
            } else {
                e10--;
            }
            i++, nd++;
        }
    }
    if (nd == 0) return -1;
    if (i < n && (p[i] == 'e' || p[i] == 'E')) {
        i++;
        int eneg = 0;
        if (i < n && (p[i] == '+' || p[i] == '-')) eneg = p[i] == '-', i++;
        int64_t ev = 0, ed = 0;
        while (i < n && p[i] >= '0' && p[i] <= '9') {
            if (ev < 100000) ev = ev * 10 + (p[i] - '0');
            i++, ed++;
        }
        if (ed == 0) return -1;
        e10 += eneg ? -ev : ev;
    }
    if (i != n) return -1;
    if (mant == 0 && !dropped) {
        *out = neg ? -0.0 : 0.0;
        return 0;
    }
    if (!dropped && mant <= (1ULL << 53) && e10 >= -22 && e10 <= 22) {
        /* Clinger: both operands exact doubles, one correctly rounded operation */
        double v = (double)mant;
        v = e10 < 0 ? v / POW10[-e10] : v * POW10[e10];
        *out = neg ? -v : v;
        return 0;
    }
#if defined(__GLIBC__)
    {
        char buf[128];
        if (n >= (int64_t)sizeof(buf)) return -1;
        memcpy(buf, p, (size_t)n);
        buf[n] = 0;
        locale_t loc = c_locale();
        if (loc == (locale_t)0) return -1;
        char *end = NULL;
        double v = strtod_l(buf, &end, loc);
        if (end != buf + n) return -1;
        /* out of range (inf) or below the normal range: the string path's rules there are Arrow's; refuse */
        if (!(v == v) || v > 1.7976931348623157e308 || v < -1.7976931348623157e308) return -1;
        if (v != 0 && v < 2.2250738585072014e-308 && v > -2.2250738585072014e-308) return -1;
        if (v == 0) return -1; /* a non-zero mantissa that underflowed */
        *out = v;
        return 0;
    }
#else
    return -1;
#endif
}

/* parse_float_general's result, with a fast path for the counters' usual form [-]d*[.d*] of at most 19
 * digits and no exponent: one loop, then Clinger's exact case (or zero) as in the general parser */
static inline int parse_float(const uint8_t *p, int64_t n, double *out) {
    int64_t i = 0;
    int neg = 0;
    if (n && p[0] == '-') neg = 1, i = 1;
    uint64_t mant = 0;
    int64_t nd = 0, fd = 0;
    while (i < n && (uint8_t)(p[i] - '0') <= 9) mant = mant * 10 + (uint64_t)(p[i++] - '0'), nd++;
    if (i < n && p[i] == '.') {
        i++;
        while (i < n && (uint8_t)(p[i] - '0') <= 9) mant = mant * 10 + (uint64_t)(p[i++] - '0'), fd++;
    }
    if (i == n && nd + fd > 0 && nd + fd <= 19) {
        if (mant == 0) {
            *out = neg ? -0.0 : 0.0;
            return 0;
        }
        if (mant <= (1ULL << 53) && fd <= 22) {
            double v = (double)mant / POW10[fd];
            *out = neg ? -v : v;
            return 0;
        }
    }
    return parse_float_general(p, n, out);
}

/* --------------------------------------------------------------------------------------------- api */

void csv_free(Scanner *s) {
    if (!s) return;
    if (s->dicts)
        for (int32_t c = 0; c < s->ncols; c++)
            if (s->kinds[c] == K_TEXT) dict_free(&s->dicts[c]);
    free(s->dicts);
    free(s->kinds);
    free(s->nulls);
    free(s->scratch);
    free(s->fstart);
    free(s->flen);
    free(s->fesc);
    free(s);
}

/* a scanner for ncols columns of the given kinds; null tokens each followed by "\0" */
Scanner *csv_new(int32_t ncols, const int8_t *kinds, const uint8_t *nulls, int64_t nulls_len) {
    if (ncols < 1 || ncols > MAX_COLS) return NULL;
    Scanner *s = calloc(1, sizeof(Scanner));
    if (!s) return NULL;
    s->ncols = ncols;
    s->kinds = malloc((size_t)ncols);
    s->dicts = calloc((size_t)ncols, sizeof(Dict));
    s->nulls = malloc((size_t)nulls_len + 1);
    s->scratch_cap = 4096;
    s->scratch = malloc((size_t)s->scratch_cap);
    s->fstart = malloc(sizeof(int64_t) * (size_t)ncols);
    s->flen = malloc(sizeof(int64_t) * (size_t)ncols);
    s->fesc = malloc((size_t)ncols);
    if (!s->kinds || !s->dicts || !s->nulls || !s->scratch || !s->fstart || !s->flen || !s->fesc) {
        csv_free(s);
        return NULL;
    }
    memcpy(s->kinds, kinds, (size_t)ncols);
    memcpy(s->nulls, nulls, (size_t)nulls_len);
    s->nulls[nulls_len] = 0;
    s->nulls_len = nulls_len;
    for (int32_t c = 0; c < ncols; c++)
        if (kinds[c] == K_TEXT && dict_init(&s->dicts[c]) != 0) {
            s->kinds[c] = 0; /* not initialised: csv_free must not free it */
            csv_free(s);
            return NULL;
        }
    return s;
}

/* the dictionary of text column c after the last call: out[0] = count, out[1] = data bytes,
 * out[2] = offsets pointer, out[3] = data pointer */
void csv_dict(const Scanner *s, int32_t c, int64_t *out) {
    const Dict *d = &s->dicts[c];
    out[0] = d->count;
    out[1] = d->data_len;
    out[2] = (int64_t)(intptr_t)d->offsets;
    out[3] = (int64_t)(intptr_t)d->data;
}

/* convert one complete cell of column c into row `row` of the outputs; 0 ok, else a bail reason */
static inline int convert_cell(Scanner *s, int32_t c, const uint8_t *f, int64_t fl, uint8_t esc, int64_t row,
                               void *const *vals, uint8_t *const *valid) {
    int8_t k = s->kinds[c];
    if (k == K_TEXT) {
        if (esc) { /* undouble the quotes into the scratch buffer */
            if (fl > s->scratch_cap) {
                int64_t cap = s->scratch_cap;
                while (cap < fl) cap *= 2;
                uint8_t *sc = realloc(s->scratch, (size_t)cap);
                if (!sc) return 6;
                s->scratch = sc;
                s->scratch_cap = cap;
            }
            int64_t o = 0;
            for (int64_t i = 0; i < fl; i++) {
                s->scratch[o++] = f[i];
                if (f[i] == '"') i++; /* the second quote of a pair */
            }
            f = s->scratch;
            fl = o;
        }
        int32_t code = dict_intern(&s->dicts[c], f, fl);
        if (code < 0) return 6;
        ((int32_t *)vals[c])[row] = code;
        return 0;
    }
    if (k == 0) return 0;
    if (esc) return 7; /* doubled quotes in a number cell */
    if (fl && (is_blank(f[0]) || f[0] == '"' || is_blank(f[fl - 1]) || f[fl - 1] == '"')) trim_cell(&f, &fl);
    int ok;
    if (k == K_FLOAT) {
        double v;
        ok = parse_float(f, fl, &v) == 0;
        ((double *)vals[c])[row] = ok ? v : 0;
    } else if (k == K_TIME) {
        int64_t v;
        ok = parse_time_ns(f, fl, &v) == 0;
        ((int64_t *)vals[c])[row] = ok ? v : 0;
    } else {
        int64_t v;
        ok = parse_int(f, fl, &v) == 0;
        ((int64_t *)vals[c])[row] = ok ? v : 0;
        if (ok && v == UINT32_NONE) return 0; /* null */
    }
    if (ok) valid[c][row >> 3] |= (uint8_t)(1u << (row & 7));
    else if (!is_null_token(s, f, fl)) return 8; /* a value the string path would warn about (or read its own way) */
    return 0;
}

#define BAIL(reason)            \
    do {                        \
        status[0] = ST_BAIL;    \
        status[1] = row_start;  \
        status[2] = row_start;  \
        status[3] = (reason);   \
        status[4] = rows;       \
        return rows;            \
    } while (0)

/* Scan rows of b[pos:n] into the column outputs (a fresh batch: dictionaries restart).
 * vals[c]: int32 codes (text), int64 (time, int) or double (float), max_rows each;
 * valid[c]: validity bitmap of max_rows bits (ignored for text: always valid).
 * status: [0] code, [1] consumed (offset after the last complete row), [2] bail offset, [3] bail reason,
 * [4] rows. Returns the rows written.
 * One pass: each cell is converted as soon as its end is found. A row that turns out incomplete (more
 * input needed) or malformed is not counted, so what its cells wrote is overwritten or ignored; at most
 * its complete cells add unused dictionary entries. */
int64_t csv_scan(Scanner *s, const uint8_t *b, int64_t n, int64_t pos, int32_t at_eof, int64_t max_rows,
                 void *const *vals, uint8_t *const *valid, int64_t *status) {
    const int32_t nc = s->ncols;
    int64_t rows = 0;
    int64_t p = pos;
    int64_t row_start = pos;
    for (int32_t c = 0; c < nc; c++) {
        if (s->kinds[c] == K_TEXT) dict_reset(&s->dicts[c]);
        else memset(valid[c], 0, (size_t)((max_rows + 7) / 8));
    }
    status[2] = status[3] = -1;
    for (;;) {
        /* skip empty lines */
        while (p < n && (b[p] == '\n' || b[p] == '\r')) p++;
        row_start = p;
        if (p >= n) {
            status[0] = at_eof ? ST_DONE : ST_NEED_MORE;
            status[1] = p;
            status[4] = rows;
            return rows;
        }
        if (rows >= max_rows) {
            status[0] = ST_FULL;
            status[1] = p;
            status[4] = rows;
            return rows;
        }
        int32_t c = 0;
        for (;;) {
            uint8_t esc = 0;
            int64_t st, len;
            if (p < n && b[p] == '"') {
                p++;
                st = p;
                for (;;) {
                    const uint8_t *q = memchr(b + p, '"', (size_t)(n - p));
                    if (!q) {
                        if (at_eof) BAIL(9); /* unterminated quote */
                        goto need_more;
                    }
                    int64_t qi = q - b;
                    if (memchr(b + p, '\n', (size_t)(qi - p)) || memchr(b + p, '\r', (size_t)(qi - p))) BAIL(1);
                    if (qi + 1 >= n) {
                        if (!at_eof) goto need_more;
                        p = qi + 1;
                        break;
                    }
                    if (b[qi + 1] == '"') { /* doubled quote */
                        esc = 1;
                        p = qi + 2;
                        continue;
                    }
                    p = qi + 1;
                    break;
                }
                len = p - 1 - st;
                if (p < n && b[p] != ',' && b[p] != '\n' && b[p] != '\r') BAIL(2); /* text after a closing quote */
            } else {
                st = p;
                p = field_end(b, p, n);
                if (p < n && b[p] == '"') BAIL(3); /* a quote inside an unquoted field */
                len = p - st;
            }
            if (p >= n && !at_eof) goto need_more; /* the cell may go on in the next chunk */
            if (c >= nc) BAIL(4);                  /* too many fields */
            int why = convert_cell(s, c, b + st, len, esc, rows, vals, valid);
            if (why) BAIL(why);
            c++;
            if (p >= n) break;
            if (b[p] == ',') {
                p++;
                continue;
            }
            /* line end */
            if (b[p] == '\r' && p + 1 < n && b[p + 1] == '\n') p += 2;
            else if (b[p] == '\r' && p + 1 >= n && !at_eof) goto need_more; /* keep CRLF together */
            else p++;
            break;
        }
        if (c != nc) BAIL(5); /* too few fields */
        rows++;
        continue;
    need_more:
        status[0] = ST_NEED_MORE;
        status[1] = row_start;
        status[4] = rows;
        return rows;
    }
}
