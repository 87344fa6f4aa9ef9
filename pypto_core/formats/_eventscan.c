/* Chrome-trace event scanner: the hot loop of pypto_core.formats.chrome_trace.
 *
 * Why C: a Python object per event tops out near 40-80 MB/s on the 2-core target machine (orjson,
 * msgspec, DuckDB read_json all measured there); this scanner does one pass over the bytes and writes
 * Arrow string-view columns plus exact int64-ns times, so Python only touches whole columns.
 *
 * Input: a buffer positioned inside the top-level events array (after '[' or after a ',').
 * Output, per requested field: an Arrow string column (int32 offsets + data, strings unescaped, numbers
 * and nested values as their JSON text) and a kind byte per value (0 absent, 1 string, 2 number,
 * 3 literal, 4 raw JSON). The spans are found in one pass, then copied field by field.
 * ts and dur are parsed exactly from decimal text (string or number) into int64 ns, never through a
 * double (FORMATS.md §0.1), except exponent forms, which are rare and go through strtod.
 * Built with `cc -O2 -shared -fPIC`; loaded with ctypes (which releases the GIL during the call).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#define K_ABSENT 0
#define K_STRING 1
#define K_NUMBER 2
#define K_LITERAL 3
#define K_RAW 4

/* status codes written to out_status[0] */
#define ST_NEED_MORE 1 /* input ended inside an event; consumed = start of that event */
#define ST_ARRAY_END 2 /* ']' closed the events array; consumed = just after it */
#define ST_FULL 3      /* output capacity reached */
#define ST_ERROR 4     /* malformed; out_status[2] = byte offset */

/* top-level fields, in this order, then the requested args keys */
enum { F_PH, F_NAME, F_CAT, F_PID, F_TID, F_ID, F_BP, F_ARG0_KEY, F_ARG0_VAL, N_FIXED };

/* first (up to) 8 bytes of a key as an integer, for cheap comparisons */
static inline uint64_t prefix8(const uint8_t *p, int64_t len) {
    uint64_t v = 0;
    memcpy(&v, p, (size_t)(len < 8 ? len : 8));
    return v;
}

/* the top-level key -> field index (F_*), or -1 */
static inline int top_field(const uint8_t *k, int64_t len) {
    switch (len) {
        case 2:
            if (k[0] == 'p' && k[1] == 'h') return F_PH;
            if (k[0] == 'i' && k[1] == 'd') return F_ID;
            if (k[0] == 'b' && k[1] == 'p') return F_BP;
            return -1;
        case 3:
            if (k[0] == 'p' && k[1] == 'i' && k[2] == 'd') return F_PID;
            if (k[0] == 't' && k[1] == 'i' && k[2] == 'd') return F_TID;
            if (k[0] == 'c' && k[1] == 'a' && k[2] == 't') return F_CAT;
            return -1;
        case 4:
            if (memcmp(k, "name", 4) == 0) return F_NAME;
            return -1;
    }
    return -1;
}

#define MAX_DEPTH 256
#define ERR_TRUNC (-1)
#define ERR_BAD (-2)

typedef struct {
    const uint8_t *b;
    int64_t n;
    int64_t p;
    int64_t err_pos;
} Scan;

typedef struct {
    int64_t start; /* for strings: first byte after the opening quote */
    int64_t len;   /* for strings: raw length between the quotes */
    int kind;
    int escaped;
} Span;

static inline void skip_ws(Scan *s) {
    while (s->p < s->n) {
        uint8_t c = s->b[s->p];
        if (c == ' ' || c == '\n' || c == '\r' || c == '\t')
            s->p++;
        else
            break;
    }
}

static int bad(Scan *s) {
    s->err_pos = s->p;
    return ERR_BAD;
}

/* s->p at the opening quote */
static int scan_string(Scan *s, Span *out) {
    int64_t p = s->p + 1;
    int escaped = 0;
    const uint8_t *b = s->b;
    int64_t n = s->n;
    for (;;) {
#if defined(__SSE2__)
        /* 16 bytes at a time: call stacks make strings most of a trace's bytes */
        const __m128i q = _mm_set1_epi8('"'), bs = _mm_set1_epi8('\\');
        while (p + 16 <= n) {
            __m128i x = _mm_loadu_si128((const __m128i *)(b + p));
            int m = _mm_movemask_epi8(_mm_or_si128(_mm_cmpeq_epi8(x, q), _mm_cmpeq_epi8(x, bs)));
            if (m) { p += __builtin_ctz((unsigned)m); break; }
            p += 16;
        }
#endif
        while (p < n && b[p] != '"' && b[p] != '\\') p++;
        if (p >= n) return ERR_TRUNC;
        if (b[p] == '"') break;
        escaped = 1;
        p += 2; /* backslash and the escaped char; \uXXXX hex digits are plain bytes */
        if (p > n) return ERR_TRUNC;
    }
    out->start = s->p + 1;
    out->len = p - (s->p + 1);
    out->kind = K_STRING;
    out->escaped = escaped;
    s->p = p + 1;
    return 0;
}

static int scan_number(Scan *s, Span *out) {
    int64_t p = s->p, start = p;
    const uint8_t *b = s->b;
    int64_t n = s->n;
    if (p < n && b[p] == '-') p++;
    int64_t d0 = p;
    while (p < n && b[p] >= '0' && b[p] <= '9') p++;
    if (p == d0) { s->p = p; return p >= n ? ERR_TRUNC : bad(s); }
    if (p < n && b[p] == '.') {
        p++;
        int64_t f0 = p;
        while (p < n && b[p] >= '0' && b[p] <= '9') p++;
        if (p == f0) { s->p = p; return p >= n ? ERR_TRUNC : bad(s); }
    }
    if (p < n && (b[p] == 'e' || b[p] == 'E')) {
        p++;
        if (p < n && (b[p] == '+' || b[p] == '-')) p++;
        int64_t e0 = p;
        while (p < n && b[p] >= '0' && b[p] <= '9') p++;
        if (p == e0) { s->p = p; return p >= n ? ERR_TRUNC : bad(s); }
    }
    if (p >= n) return ERR_TRUNC; /* a number may continue in the next chunk */
    out->start = start;
    out->len = p - start;
    out->kind = K_NUMBER;
    out->escaped = 0;
    s->p = p;
    return 0;
}

static int scan_literal(Scan *s, Span *out) {
    static const char *lits[] = {"true", "false", "null"};
    for (int i = 0; i < 3; i++) {
        int64_t L = (int64_t)strlen(lits[i]);
        if (s->b[s->p] != (uint8_t)lits[i][0]) continue;
        if (s->p + L > s->n) {
            if (memcmp(s->b + s->p, lits[i], (size_t)(s->n - s->p)) == 0) return ERR_TRUNC;
            return bad(s);
        }
        if (memcmp(s->b + s->p, lits[i], (size_t)L) != 0) return bad(s);
        out->start = s->p;
        out->len = L;
        out->kind = (i == 2) ? K_ABSENT : K_LITERAL; /* null is absent */
        out->escaped = 0;
        s->p += L;
        return 0;
    }
    return bad(s);
}

static int scan_value(Scan *s, Span *out, int depth);

/* s->p at '{' or '['; validates the whole container */
static int scan_container(Scan *s, Span *out, int depth) {
    if (depth > MAX_DEPTH) return bad(s);
    int64_t start = s->p;
    uint8_t open = s->b[s->p];
    uint8_t close = open == '{' ? '}' : ']';
    Span tmp;
    int rc;
    s->p++;
    skip_ws(s);
    if (s->p >= s->n) return ERR_TRUNC;
    if (s->b[s->p] == close) {
        s->p++;
    } else {
        for (;;) {
            if (open == '{') {
                skip_ws(s);
                if (s->p >= s->n) return ERR_TRUNC;
                if (s->b[s->p] != '"') return bad(s);
                if ((rc = scan_string(s, &tmp))) return rc;
                skip_ws(s);
                if (s->p >= s->n) return ERR_TRUNC;
                if (s->b[s->p] != ':') return bad(s);
                s->p++;
            }
            if ((rc = scan_value(s, &tmp, depth + 1))) return rc;
            skip_ws(s);
            if (s->p >= s->n) return ERR_TRUNC;
            if (s->b[s->p] == ',') { s->p++; continue; }
            if (s->b[s->p] == close) { s->p++; break; }
            return bad(s);
        }
    }
    out->start = start;
    out->len = s->p - start;
    out->kind = K_RAW;
    out->escaped = 0;
    return 0;
}

static int scan_value(Scan *s, Span *out, int depth) {
    skip_ws(s);
    if (s->p >= s->n) return ERR_TRUNC;
    uint8_t c = s->b[s->p];
    if (c == '"') return scan_string(s, out);
    if (c == '{' || c == '[') return scan_container(s, out, depth);
    if (c == '-' || (c >= '0' && c <= '9')) return scan_number(s, out);
    return scan_literal(s, out);
}

static int hexval(uint8_t c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static int put_utf8(uint8_t *o, uint32_t cp) {
    if (cp < 0x80) { o[0] = (uint8_t)cp; return 1; }
    if (cp < 0x800) { o[0] = 0xC0 | (cp >> 6); o[1] = 0x80 | (cp & 0x3F); return 2; }
    if (cp < 0x10000) {
        o[0] = 0xE0 | (cp >> 12); o[1] = 0x80 | ((cp >> 6) & 0x3F); o[2] = 0x80 | (cp & 0x3F);
        return 3;
    }
    o[0] = 0xF0 | (cp >> 18); o[1] = 0x80 | ((cp >> 12) & 0x3F);
    o[2] = 0x80 | ((cp >> 6) & 0x3F); o[3] = 0x80 | (cp & 0x3F);
    return 4;
}

/* Unescape sp into o; returns bytes written, or -1 on a bad escape. Output is never longer than input. */
static int64_t unescape_to(const uint8_t *src, int64_t len, uint8_t *o0) {
    const uint8_t *p = src, *end = src + len;
    uint8_t *o = o0;
    while (p < end) {
        if (*p != '\\') { *o++ = *p++; continue; }
        if (p + 1 >= end) return -1;
        uint8_t e = p[1];
        p += 2;
        switch (e) {
            case '"': *o++ = '"'; break;
            case '\\': *o++ = '\\'; break;
            case '/': *o++ = '/'; break;
            case 'b': *o++ = '\b'; break;
            case 'f': *o++ = '\f'; break;
            case 'n': *o++ = '\n'; break;
            case 'r': *o++ = '\r'; break;
            case 't': *o++ = '\t'; break;
            case 'u': {
                if (end - p < 4) return -1;
                uint32_t cp = 0;
                for (int i = 0; i < 4; i++) {
                    int h = hexval(p[i]);
                    if (h < 0) return -1;
                    cp = cp * 16 + (uint32_t)h;
                }
                p += 4;
                if (cp >= 0xD800 && cp < 0xDC00 && end - p >= 6 && p[0] == '\\' && p[1] == 'u') {
                    uint32_t lo = 0;
                    int ok = 1;
                    for (int i = 0; i < 4; i++) {
                        int h = hexval(p[2 + i]);
                        if (h < 0) { ok = 0; break; }
                        lo = lo * 16 + (uint32_t)h;
                    }
                    if (ok && lo >= 0xDC00 && lo < 0xE000) {
                        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                        p += 6;
                    }
                }
                /* a lone surrogate becomes U+FFFD (3 bytes, never longer than its 6-byte escape) */
                if (cp >= 0xD800 && cp < 0xE000) cp = 0xFFFD;
                o += put_utf8(o, cp);
                break;
            }
            default: return -1;
        }
    }
    return o - o0;
}

/* Output columns, field-major [f * cap + ev]; each field's bytes go to its own region of out. */
typedef struct {
    const uint8_t *buf;
    int64_t buf_len;
    int32_t *lens;    /* bytes stored per value (0 when absent) */
    uint8_t *kind;    /* K_* */
    uint8_t *out;     /* nf regions of region_cap bytes */
    int64_t region_cap;
    int64_t *used;    /* bytes used per region */
    int64_t cap;
    int64_t err_pos;
} Cols;

/* Copy (unescaping) span sp as field f of event ev, straight away while the input is in cache. */
static int store(Cols *c, int f, int64_t ev, const Span *sp) {
    int64_t i = (int64_t)f * c->cap + ev;
    if (c->kind[i] != K_ABSENT) c->used[f] -= c->lens[i]; /* a repeated key: the last one wins */
    c->kind[i] = (uint8_t)sp->kind;
    c->lens[i] = 0;
    if (sp->kind == K_ABSENT) return 0;
    int64_t L = sp->len;
    uint8_t *o = c->out + (int64_t)f * c->region_cap + c->used[f];
    if (c->used[f] + L + 16 > c->region_cap) { c->err_pos = sp->start; return ERR_BAD; } /* cannot happen */
    const uint8_t *src = c->buf + sp->start;
    if (sp->escaped) {
        int64_t w = unescape_to(src, L, o);
        if (w < 0) { c->err_pos = sp->start; return ERR_BAD; }
        L = w;
    } else if (L <= 16 && sp->start + 16 <= c->buf_len) {
        memcpy(o, src, 16); /* fixed-size copy: no libc call per short value */
    } else {
        memcpy(o, src, (size_t)L);
    }
    c->lens[i] = (int32_t)L;
    c->used[f] += L;
    return 0;
}

/* Exact decimal microseconds -> int64 ns (rounded half up on the 4th decimal). 0 ok, -1 not a number. */
static int parse_us_to_ns(const uint8_t *p, int64_t len, int64_t *out) {
    const uint8_t *end = p + len;
    int neg = 0;
    while (p < end && (*p == ' ' || *p == '\t')) p++;
    while (end > p && (end[-1] == ' ' || end[-1] == '\t')) end--;
    if (p < end && (*p == '-' || *p == '+')) { neg = *p == '-'; p++; }
    const uint8_t *q = p;
    for (; q < end; q++) {
        if (*q == 'e' || *q == 'E') {
            /* exponent form: rare (hand-written traces); go through a double */
            char tmp[64];
            int64_t L = end - p;
            if (L <= 0 || L >= 63) return -1;
            memcpy(tmp, p, (size_t)L);
            tmp[L] = 0;
            char *e;
            double d = strtod(tmp, &e);
            if (*e || d != d || d > 9.2e15 || d < -9.2e15) return -1;
            double ns = d * 1000.0;
            int64_t r = (int64_t)(ns + (ns >= 0 ? 0.5 : -0.5));
            *out = neg ? -r : r;
            return 0;
        }
    }
    uint64_t ip = 0;
    int digits = 0;
    while (p < end && *p >= '0' && *p <= '9') {
        if (ip > 9000000000000000ULL) return -1; /* int64 ns overflows at 9.2e15 us */
        ip = ip * 10 + (uint64_t)(*p - '0');
        p++;
        digits++;
    }
    uint64_t frac = 0;
    int fd = 0, round_up = 0, fdigits = 0;
    if (p < end && *p == '.') {
        p++;
        while (p < end && *p >= '0' && *p <= '9') {
            if (fd < 3) { frac = frac * 10 + (uint64_t)(*p - '0'); fd++; }
            else if (fd == 3) { round_up = *p >= '5'; fd++; }
            p++;
            fdigits++;
        }
        if (fdigits == 0 && digits == 0) return -1;
    }
    if (p != end || (digits == 0 && fdigits == 0)) return -1;
    while (fd < 3) { frac *= 10; fd++; }
    if (ip > 9000000000000000ULL) return -1;
    int64_t ns = (int64_t)(ip * 1000 + frac) + round_up;
    *out = neg ? -ns : ns;
    return 0;
}

static int key_is(const Scan *s, const Span *k, const char *lit, int64_t litlen) {
    return !k->escaped && k->len == litlen && memcmp(s->b + k->start, lit, (size_t)litlen) == 0;
}

/*
 * Scan events from buf[pos:] (inside the events array) into Arrow-ready string columns.
 *   arg_keys: n_args keys, each terminated by NUL
 *   lens (int32), kinds (uint8): (N_FIXED + n_args) * cap, field-major: value byte lengths and kinds
 *   ts, dur: cap int64 each; tsdur_ok: cap bytes (bit0 ts parsed, bit1 dur parsed)
 *   out: (N_FIXED + n_args) regions of region_cap >= (len - pos) + 64 bytes; field f's values are
 *        concatenated from out + f * region_cap, used[f] bytes (Python builds offsets by a cumulative sum)
 *   status: [status, consumed, err_pos, n_events]
 */
int64_t scan_events(const uint8_t *buf, int64_t len, int64_t pos, const char *arg_keys, int32_t n_args,
                    int64_t cap, int32_t *lens, uint8_t *kinds, int64_t *ts, int64_t *dur, uint8_t *tsdur_ok,
                    uint8_t *out, int64_t region_cap, int64_t *used, int64_t *status) {
    Scan s = {buf, len, pos, -1};
    const char *akeys[256];
    int64_t alens[256];
    if (n_args > 256) n_args = 256;
    int nf = N_FIXED + n_args;
    Cols c = {buf, len, lens, kinds, out, region_cap, used, cap, -1};
    for (int f = 0; f < nf; f++) used[f] = 0;
    /* Cleared in blocks of events, just ahead of use: clearing per event touched one page per field
       (a tenth of the scan), clearing the whole capacity up front wrote as many bytes as the input. */
    int64_t cleared = 0;
    const char *k = arg_keys;
    for (int i = 0; i < n_args; i++) {
        akeys[i] = k;
        alens[i] = (int64_t)strlen(k);
        k += alens[i] + 1;
    }
    uint64_t aprefix[256];
    uint8_t len_mask[64] = {0}; /* which key lengths are requested: most args keys are rejected here */
    for (int i = 0; i < n_args; i++) {
        aprefix[i] = prefix8((const uint8_t *)akeys[i], alens[i]);
        if (alens[i] < 64) len_mask[alens[i]] = 1;
    }

    int64_t ev = 0;
    int64_t consumed = pos;
    int st = 0;
    int rc = 0;
    for (;;) {
        skip_ws(&s);
        if (s.p >= s.n) { st = ST_NEED_MORE; break; }
        if (s.b[s.p] == ']') { s.p++; consumed = s.p; st = ST_ARRAY_END; break; }
        if (ev >= cap) { st = ST_FULL; break; }
        if (ev >= cleared) {
            int64_t blk = cap - cleared < 4096 ? cap - cleared : 4096;
            for (int f = 0; f < nf; f++) {
                memset(kinds + (int64_t)f * cap + cleared, 0, (size_t)blk);
                memset(lens + (int64_t)f * cap + cleared, 0, (size_t)blk * sizeof(int32_t));
            }
            cleared += blk;
        }
        if (s.b[s.p] != '{') { s.err_pos = s.p; st = ST_ERROR; break; }
        int64_t ev_start = s.p;

        tsdur_ok[ev] = 0;
        ts[ev] = 0;
        dur[ev] = 0;
        s.p++;
        skip_ws(&s);
        if (s.p >= s.n) { rc = ERR_TRUNC; goto event_fail; }
        if (s.b[s.p] == '}') { s.p++; goto event_done; }
        for (;;) {
            Span key, val;
            skip_ws(&s);
            if (s.p >= s.n) { rc = ERR_TRUNC; goto event_fail; }
            if (s.b[s.p] != '"') { rc = bad(&s); goto event_fail; }
            if ((rc = scan_string(&s, &key))) goto event_fail;
            skip_ws(&s);
            if (s.p >= s.n) { rc = ERR_TRUNC; goto event_fail; }
            if (s.b[s.p] != ':') { rc = bad(&s); goto event_fail; }
            s.p++;
            skip_ws(&s);
            if (s.p >= s.n) { rc = ERR_TRUNC; goto event_fail; }
            if (key_is(&s, &key, "args", 4) && s.b[s.p] == '{') {
                /* one level into args: capture the requested keys and the first key/value */
                int more = 1, first = 1;
                s.p++;
                skip_ws(&s);
                if (s.p >= s.n) { rc = ERR_TRUNC; goto event_fail; }
                if (s.b[s.p] == '}') { s.p++; more = 0; }
                while (more) {
                    Span ak, av;
                    skip_ws(&s);
                    if (s.p >= s.n) { rc = ERR_TRUNC; goto event_fail; }
                    if (s.b[s.p] != '"') { rc = bad(&s); goto event_fail; }
                    if ((rc = scan_string(&s, &ak))) goto event_fail;
                    skip_ws(&s);
                    if (s.p >= s.n) { rc = ERR_TRUNC; goto event_fail; }
                    if (s.b[s.p] != ':') { rc = bad(&s); goto event_fail; }
                    s.p++;
                    if ((rc = scan_value(&s, &av, 2))) goto event_fail;
                    if (first) {
                        first = 0;
                        if ((rc = store(&c, F_ARG0_KEY, ev, &ak))) goto event_fail;
                        if ((rc = store(&c, F_ARG0_VAL, ev, &av))) goto event_fail;
                    }
                    if (!ak.escaped && ak.len < 64 && len_mask[ak.len]) {
                        uint64_t pre = prefix8(s.b + ak.start, ak.len);
                        for (int i = 0; i < n_args; i++) {
                            if (alens[i] == ak.len && aprefix[i] == pre &&
                                (ak.len <= 8 || memcmp(s.b + ak.start + 8, akeys[i] + 8, (size_t)(ak.len - 8)) == 0)) {
                                if ((rc = store(&c, N_FIXED + i, ev, &av))) goto event_fail;
                                break;
                            }
                        }
                    }
                    skip_ws(&s);
                    if (s.p >= s.n) { rc = ERR_TRUNC; goto event_fail; }
                    if (s.b[s.p] == ',') { s.p++; continue; }
                    if (s.b[s.p] == '}') { s.p++; break; }
                    rc = bad(&s);
                    goto event_fail;
                }
            } else {
                if ((rc = scan_value(&s, &val, 1))) goto event_fail;
                if (key_is(&s, &key, "ts", 2) || key_is(&s, &key, "dur", 3)) {
                    int is_ts = key.len == 2;
                    int64_t v;
                    if ((val.kind == K_NUMBER || (val.kind == K_STRING && !val.escaped)) &&
                        parse_us_to_ns(s.b + val.start, val.len, &v) == 0) {
                        if (is_ts) { ts[ev] = v; tsdur_ok[ev] |= 1; }
                        else { dur[ev] = v; tsdur_ok[ev] |= 2; }
                    }
                } else if (!key.escaped && key.len <= 4) {
                    int f = top_field(s.b + key.start, key.len);
                    if (f >= 0 && (rc = store(&c, f, ev, &val))) goto event_fail;
                }
            }
            skip_ws(&s);
            if (s.p >= s.n) { rc = ERR_TRUNC; goto event_fail; }
            if (s.b[s.p] == ',') { s.p++; continue; }
            if (s.b[s.p] == '}') { s.p++; break; }
            rc = bad(&s);
            goto event_fail;
        }
    event_done:
        skip_ws(&s);
        /* the event counts only once its separator is seen, so that a call never ends between the two */
        if (s.p >= s.n) { rc = ERR_TRUNC; goto event_fail; }
        ev++;
        if (s.b[s.p] == ',') { s.p++; consumed = s.p; continue; }
        if (s.b[s.p] == ']') { s.p++; consumed = s.p; st = ST_ARRAY_END; break; }
        s.err_pos = s.p;
        st = ST_ERROR;
        break;
    event_fail:
        if (rc == ERR_TRUNC) {
            for (int f = 0; f < nf; f++) { /* drop the partial event */
                int64_t i = (int64_t)f * cap + ev;
                if (kinds[i] != K_ABSENT) used[f] -= lens[i];
                kinds[i] = K_ABSENT;
                lens[i] = 0;
            }
            s.p = ev_start;
            consumed = ev_start;
            st = ST_NEED_MORE;
        } else {
            if (s.err_pos < 0) s.err_pos = c.err_pos >= 0 ? c.err_pos : s.p;
            st = ST_ERROR;
        }
        break;
    }
    if (st == ST_FULL) consumed = s.p;

    status[0] = st;
    status[1] = consumed;
    status[2] = s.err_pos;
    status[3] = ev;
    return ev;
}

/* End of the JSON value starting at buf[pos] (after whitespace): >=0 end offset, -1 truncated, -2 malformed. */
int64_t skip_value(const uint8_t *buf, int64_t len, int64_t pos) {
    Scan s = {buf, len, pos, -1};
    Span sp;
    int rc = scan_value(&s, &sp, 0);
    if (rc == ERR_TRUNC) return -1;
    if (rc) return -2;
    return s.p;
}

/* The offsets of an Arrow string array from its values' byte lengths: offsets[0] = 0, then running sums
   (numpy's cumsum took 2.5 ns a value, and held the GIL; a fifth of building a batch's columns). */
void lens_to_offsets(const int32_t *lens, int64_t n, int32_t *offsets) {
    int32_t run = 0;
    offsets[0] = 0;
    for (int64_t i = 0; i < n; i++) {
        run += lens[i];
        offsets[i + 1] = run;
    }
}
