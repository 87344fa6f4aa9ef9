/* SQLite column fetch: the hot loop of pypto_core.formats.sqlite_fetch (torch_npu / msprof db exports).
 *
 * Why C: Python's sqlite3 builds one tuple and one object per value; fetching the ~3.5 M PMU rows of a
 * 100 MB export took ~10 s that way. Here a prepared SELECT is stepped in a loop and each value is written
 * into preallocated column buffers (int64, float64, or int32 codes through a hash map of ids), each with an
 * Arrow validity bitmap, which Python wraps as Arrow arrays without touching the rows.
 *
 * Strict: a value whose storage class the column's kind does not take (text in an int64 or float64
 * column, a text time that is not plain decimal digits) stops the fetch with SF_MISMATCH, and the caller
 * reads that table through Python's sqlite3 instead, so odd files give the values (and warnings) they
 * always gave.
 *
 * Three parts: the fetch of a prepared SELECT (sf_fetch), the PMU pivot into a temporary file (sf_pivot),
 * and a reader of one table's pages (sf_raw_*) for the scans SQLite's virtual machine is slow at.
 *
 * Safety as for Python's connection (ascend_db.connect): the file is opened read-only and immutable, no
 * function of its schema runs (trusted_schema off, query_only), an authorizer refuses anything read through
 * a view or trigger and recursive queries, and a progress handler interrupts past the caller's deadline.
 *
 * No sqlite3.h is needed: the few prototypes and constants used are declared below (SQLite's stable ABI).
 * Built with `cc -O2 -shared -fPIC` and no -lsqlite3: the symbols resolve against the libsqlite3 that the
 * Python side loads first with RTLD_GLOBAL (the one Python's own _sqlite3 uses).
 */
#define _POSIX_C_SOURCE 200809L /* pread, pwrite, clock_gettime */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

typedef struct sqlite3 sqlite3;
typedef struct sqlite3_stmt sqlite3_stmt;

extern int sqlite3_open_v2(const char *filename, sqlite3 **db, int flags, const char *vfs);
extern int sqlite3_close(sqlite3 *db);
extern int sqlite3_exec(sqlite3 *db, const char *sql, int (*cb)(void *, int, char **, char **), void *arg,
                        char **errmsg);
extern void sqlite3_free(void *p);
extern const char *sqlite3_errmsg(sqlite3 *db);
extern int sqlite3_prepare_v2(sqlite3 *db, const char *sql, int nbyte, sqlite3_stmt **stmt,
                              const char **tail);
extern int sqlite3_step(sqlite3_stmt *stmt);
extern int sqlite3_finalize(sqlite3_stmt *stmt);
extern int sqlite3_column_count(sqlite3_stmt *stmt);
extern int sqlite3_column_type(sqlite3_stmt *stmt, int col);
extern long long sqlite3_column_int64(sqlite3_stmt *stmt, int col);
extern double sqlite3_column_double(sqlite3_stmt *stmt, int col);
extern const unsigned char *sqlite3_column_text(sqlite3_stmt *stmt, int col);
extern int sqlite3_column_bytes(sqlite3_stmt *stmt, int col);
extern void sqlite3_progress_handler(sqlite3 *db, int n, int (*cb)(void *), void *arg);
typedef int (*sf_authorizer)(void *, int, const char *, const char *, const char *, const char *);
extern int sqlite3_set_authorizer(sqlite3 *db, sf_authorizer cb, void *arg);

#define SQLITE_OK 0
#define SQLITE_DENY 1
#define SQLITE_ROW 100
#define SQLITE_DONE 101
#define SQLITE_INTEGER 1
#define SQLITE_FLOAT 2
#define SQLITE_NULL 5
#define SQLITE_TEXT 3
#define SQLITE_BLOB 4
#define SQLITE_OPEN_READONLY 0x00000001
#define SQLITE_OPEN_URI 0x00000040
#define SQLITE_OPEN_NOMUTEX 0x00008000
#define SQLITE_RECURSIVE 33

/* column kinds (sqlite_fetch.Kind) */
#define K_INT64 0   /* INTEGER -> int64 */
#define K_DOUBLE 1  /* INTEGER (rounded to the nearest float64, as SQLite converts it) or REAL -> float64 */
#define K_TEXTINT 2 /* INTEGER, or TEXT of plain decimal digits ([-]d{1,18}) -> int64 */
#define K_CODE 3    /* INTEGER looked up in a map -> int32 code; null where the map lacks it (a left join) */

/* results (negative: the fetch stopped) */
#define SF_ERROR -1    /* SQLite failed: sf_errmsg says why (interrupted, not authorized, corrupt, ...) */
#define SF_MISMATCH -2 /* a value the column's kind does not take: *bad_col says which column */
#define SF_SCATTERED -4 /* the pivot's rows come in an order that would read its file back chunk by chunk */

typedef struct {
    sqlite3 *db;
    double deadline; /* CLOCK_MONOTONIC seconds (Python's time.monotonic) */
    char err[512];
} sf_db;

typedef struct {
    sf_db *owner;
    sqlite3_stmt *stmt;
    int done;
} sf_stmt;

/* ------------------------------------------------------------------------------------------- the map */

/* int64 key -> int32 value: a direct table where the keys are dense (ids 0..n, as task ids usually are),
 * else open addressing. */
typedef struct {
    int64_t *keys;
    int32_t *values; /* -1: empty slot */
    uint64_t mask;
    int64_t base, span; /* direct table: values[key - base] for 0 <= key - base < span; span 0: hashed */
    int32_t size;       /* distinct keys */
} sf_map;

static uint64_t mix64(uint64_t x) {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

static int32_t map_get(const sf_map *m, int64_t key) {
    if (m->span) {
        uint64_t at = (uint64_t)key - (uint64_t)m->base;
        return at < (uint64_t)m->span ? m->values[at] : -1;
    }
    uint64_t i = mix64((uint64_t)key) & m->mask;
    while (m->values[i] >= 0) {
        if (m->keys[i] == key) return m->values[i];
        i = (i + 1) & m->mask;
    }
    return -1;
}

/* A map of ``n`` keys to ``values`` (n non-negative values), or where ``values`` is NULL to 0, 1, 2, ... in
 * the order of the keys' first occurrence. A repeated key keeps its first value. NULL without memory. */
sf_map *sf_map_new(const int64_t *keys, const int32_t *values, int64_t n) {
    if (n < 0 || n > 0x3fffffff) return NULL;
    sf_map *m = calloc(1, sizeof(sf_map));
    if (!m) return NULL;
    int64_t lo = n ? keys[0] : 0, hi = lo;
    for (int64_t k = 1; k < n; k++) {
        if (keys[k] < lo) lo = keys[k];
        if (keys[k] > hi) hi = keys[k];
    }
    uint64_t range = (uint64_t)hi - (uint64_t)lo; /* no overflow in unsigned arithmetic */
    if (n > 0 && range < (uint64_t)n * 2 + 1024) {
        m->base = lo, m->span = (int64_t)range + 1;
        if (!(m->values = malloc((size_t)m->span * sizeof(int32_t)))) {
            free(m);
            return NULL;
        }
        memset(m->values, 0xff, (size_t)m->span * sizeof(int32_t));
        for (int64_t k = 0; k < n; k++) {
            int32_t *slot = &m->values[keys[k] - lo];
            if (*slot < 0) {
                *slot = values ? values[k] : m->size;
                m->size++;
            }
        }
        return m;
    }
    uint64_t cap = 16;
    while (cap < (uint64_t)n * 2) cap <<= 1;
    m->keys = malloc(cap * sizeof(int64_t));
    m->values = malloc(cap * sizeof(int32_t));
    if (!m->keys || !m->values) {
        free(m->keys);
        free(m->values);
        free(m);
        return NULL;
    }
    memset(m->values, 0xff, cap * sizeof(int32_t));
    m->mask = cap - 1;
    for (int64_t k = 0; k < n; k++) {
        uint64_t i = mix64((uint64_t)keys[k]) & m->mask;
        while (m->values[i] >= 0 && m->keys[i] != keys[k]) i = (i + 1) & m->mask;
        if (m->values[i] < 0) {
            m->keys[i] = keys[k];
            m->values[i] = values ? values[k] : m->size;
            m->size++;
        }
    }
    return m;
}

int32_t sf_map_size(const sf_map *m) { return m->size; }

void sf_map_free(sf_map *m) {
    if (!m) return;
    free(m->keys);
    free(m->values);
    free(m);
}

/* ---------------------------------------------------------------------------------------- the database */

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int past_deadline(void *arg) { return now() > ((sf_db *)arg)->deadline; }

/* Only stored rows: nothing read through a view or trigger (``source`` names it), no recursive query. */
static int authorize(void *arg, int action, const char *a1, const char *a2, const char *db,
                     const char *source) {
    (void)arg, (void)a1, (void)a2, (void)db;
    return (source != NULL || action == SQLITE_RECURSIVE) ? SQLITE_DENY : SQLITE_OK;
}

static void keep_error(sf_db *h, const char *msg) {
    strncpy(h->err, msg ? msg : "unknown error", sizeof h->err - 1);
    h->err[sizeof h->err - 1] = 0;
}

/* Open ``uri`` (a file: URI with mode=ro&immutable=1) with ``cache_kib`` of page cache for the main and
 * temp databases; NULL only without memory. sf_errmsg tells a failed open (then sf_close it). */
sf_db *sf_open(const char *uri, double deadline, int cache_kib) {
    sf_db *h = calloc(1, sizeof(sf_db));
    if (!h) return NULL;
    h->deadline = deadline;
    if (sqlite3_open_v2(uri, &h->db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX, NULL) !=
        SQLITE_OK) {
        keep_error(h, h->db ? sqlite3_errmsg(h->db) : "cannot open");
        return h;
    }
    char sql[256];
    snprintf(sql, sizeof sql,
             "pragma query_only = on; pragma trusted_schema = off; pragma cache_size = -%d; "
             "pragma temp.cache_size = -%d",
             cache_kib, cache_kib);
    char *msg = NULL;
    if (sqlite3_exec(h->db, sql, NULL, NULL, &msg) != SQLITE_OK) {
        keep_error(h, msg);
        sqlite3_free(msg);
        return h;
    }
    sqlite3_set_authorizer(h->db, authorize, h);
    sqlite3_progress_handler(h->db, 100000, past_deadline, h);
    return h;
}

const char *sf_errmsg(const sf_db *h) { return h->err; }

int sf_failed(const sf_db *h) { return h->err[0] != 0; }

void sf_close(sf_db *h) {
    if (!h) return;
    if (h->db) sqlite3_close(h->db);
    free(h);
}

sf_stmt *sf_prepare(sf_db *h, const char *sql) {
    sqlite3_stmt *stmt = NULL;
    if (sqlite3_prepare_v2(h->db, sql, -1, &stmt, NULL) != SQLITE_OK) {
        keep_error(h, sqlite3_errmsg(h->db));
        sqlite3_finalize(stmt);
        return NULL;
    }
    sf_stmt *s = calloc(1, sizeof(sf_stmt));
    if (!s) {
        sqlite3_finalize(stmt);
        keep_error(h, "out of memory");
        return NULL;
    }
    s->owner = h;
    s->stmt = stmt;
    return s;
}

int sf_column_count(const sf_stmt *s) { return sqlite3_column_count(s->stmt); }

void sf_finalize(sf_stmt *s) {
    if (!s) return;
    sqlite3_finalize(s->stmt);
    free(s);
}

/* The next row: 1, 0 at the end, SF_ERROR (message kept) on failure. A finished statement stays finished
 * (stepping it again would restart it). */
static int next_row(sf_stmt *s) {
    if (s->done) return 0;
    int rc = sqlite3_step(s->stmt);
    if (rc == SQLITE_ROW) return 1;
    s->done = 1;
    if (rc == SQLITE_DONE) return 0;
    keep_error(s->owner, sqlite3_errmsg(s->owner->db));
    return SF_ERROR;
}

/* Plain decimal digits with an optional leading '-', inside int64 (ns since the epoch have 19 digits). */
static int text_int(const unsigned char *p, int n, int64_t *out) {
    int neg = 0, i = 0;
    if (n > 0 && p[0] == '-') neg = 1, i = 1;
    if (n - i < 1 || n - i > 19) return 0;
    uint64_t v = 0;
    for (; i < n; i++) {
        if (p[i] < '0' || p[i] > '9') return 0;
        v = v * 10 + (uint64_t)(p[i] - '0'); /* 19 digits stay below 2^64 */
    }
    if (v > (uint64_t)INT64_MAX) return 0; /* (-2^63 too: the text path gives null there) */
    *out = neg ? -(int64_t)v : (int64_t)v;
    return 1;
}

/* One value as either source gives it: its storage class and, for that class, its content. */
typedef struct {
    int type; /* SQLITE_INTEGER, SQLITE_FLOAT, SQLITE_TEXT, SQLITE_BLOB, SQLITE_NULL */
    int64_t i;
    double d;
    const unsigned char *text; /* text: its bytes (not NUL-terminated from the table reader) */
    int64_t bytes;
} sf_value;

static void stmt_value(sqlite3_stmt *st, int c, sf_value *v) {
    v->type = sqlite3_column_type(st, c);
    if (v->type == SQLITE_INTEGER) v->i = sqlite3_column_int64(st, c);
    if (v->type == SQLITE_FLOAT) v->d = sqlite3_column_double(st, c);
    if (v->type == SQLITE_TEXT) {
        v->text = sqlite3_column_text(st, c);
        v->bytes = sqlite3_column_bytes(st, c);
    }
}

/* One value into a column of ``kind`` at row ``r``; 0 when its storage class does not fit the kind. */
static int put(const sf_value *v, int kind, const sf_map *map, void *data, uint8_t *valid, int64_t *nulls,
               int64_t r) {
    if (v->type == SQLITE_NULL) {
        (*nulls)++;
        if (kind == K_CODE)
            ((int32_t *)data)[r] = 0;
        else
            ((int64_t *)data)[r] = 0;
        return 1;
    }
    switch (kind) {
    case K_INT64:
        if (v->type != SQLITE_INTEGER) return 0;
        ((int64_t *)data)[r] = v->i;
        break;
    case K_DOUBLE:
        if (v->type == SQLITE_INTEGER) {
            ((double *)data)[r] = (double)v->i;
        } else if (v->type == SQLITE_FLOAT) {
            ((double *)data)[r] = v->d;
        } else {
            return 0;
        }
        break;
    case K_TEXTINT:
        if (v->type == SQLITE_INTEGER) {
            ((int64_t *)data)[r] = v->i;
        } else if (v->type == SQLITE_TEXT) {
            if (v->bytes > 20 || !text_int(v->text, (int)v->bytes, &((int64_t *)data)[r])) return 0;
        } else {
            return 0;
        }
        break;
    case K_CODE: {
        if (v->type != SQLITE_INTEGER) return 0;
        int32_t code = map_get(map, v->i);
        if (code < 0) {
            (*nulls)++;
            ((int32_t *)data)[r] = 0;
            return 1;
        }
        ((int32_t *)data)[r] = code;
        break;
    }
    default:
        return 0;
    }
    valid[r >> 3] |= (uint8_t)(1u << (r & 7));
    return 1;
}

/* Up to ``cap`` rows of ``s`` into the ``ncols`` column buffers (``data[c]``: cap values of 8 bytes, 4 for
 * K_CODE; ``valid[c]``: a bitmap of cap bits, cleared here; ``nulls[c]``: the nulls counted). The rows
 * written (0: the statement is finished), SF_ERROR, or SF_MISMATCH with ``*bad_col`` set. */
int64_t sf_fetch(sf_stmt *s, int ncols, const int32_t *kinds, sf_map *const *maps, void *const *data,
                 uint8_t *const *valid, int64_t *nulls, int64_t cap, int32_t *bad_col) {
    sqlite3_stmt *st = s->stmt;
    for (int c = 0; c < ncols; c++) {
        memset(valid[c], 0, (size_t)((cap + 7) / 8));
        nulls[c] = 0;
    }
    int64_t r = 0;
    while (r < cap) {
        int rc = next_row(s);
        if (rc < 0) return rc;
        if (rc == 0) break;
        for (int c = 0; c < ncols; c++) {
            sf_value v;
            stmt_value(st, c, &v);
            if (!put(&v, kinds[c], maps[c], data[c], valid[c], &nulls[c], r)) {
                *bad_col = c;
                s->done = 1;
                return SF_MISMATCH;
            }
        }
        r++;
    }
    return r;
}

void sf_free(void *p) { free(p); }

/* ---------------------------------------------------------------------------------------- the PMU pivot */

/* The pivoted values go to a file, not to memory: a task's metrics are one column each, nslots values long,
 * laid one after the other in the file in the order the metrics are first seen (the k-th from byte
 * k * nchunks * chunk * 8), and written through a pool of chunk-sized buffers. The PMU rows come metric
 * by metric (all tasks' aic_total_time, then the next metric ...), so a chunk is filled, left and written
 * once; in any other order a chunk evicted early is read back when a later row needs it (a table whose
 * rows would read chunks back again and again is given up: SF_SCATTERED). What a pivot holds in memory is
 * the pool and one bitmap per column, whatever the file's size (on 1 GB: 24 metrics of 1.4 M tasks are
 * 273 MB in the file; the bitmaps 4 MB). */
#define MAX_METRICS 4096 /* distinct metric columns (the profiler writes a few dozen) */

typedef struct {
    const sf_map *tasks, *metrics;
    int64_t nslots;
    int32_t ncols, nseen;
    uint8_t **valid;  /* per column: its bitmap, allocated when the metric is first seen */
    int32_t *seen_as; /* per column: its place in the file (order of first sight), -1 not seen */
    size_t bitmap_bytes;
    int fd;
    int64_t chunk, nchunks;
    int32_t *where;  /* per (column, chunk): its buffer in the pool, -1 none */
    uint8_t *stored; /* per (column, chunk): written to the file once */
    double *pool;
    int32_t *owner; /* per buffer: its (column, chunk), -1 free */
    int32_t pool_size, victim;
    int64_t reread, reread_limit; /* chunks read back: rows in no useful order make it grow without end */
    int64_t last_metric;
    int32_t last_col, have_metric; /* the rows come metric by metric: look a metric up once */
    const char *failure;           /* why it stopped, where SQLite did not say */
} pivot_state;

static int pivot_init(pivot_state *p, const sf_map *tasks, const sf_map *metrics, int64_t nslots,
                      int32_t ncols, uint8_t **valid, int32_t *seen_as, int fd, int64_t chunk,
                      int32_t pool_size) {
    memset(p, 0, sizeof *p);
    p->tasks = tasks, p->metrics = metrics, p->nslots = nslots, p->ncols = ncols;
    p->valid = valid, p->fd = fd;
    p->seen_as = seen_as;
    for (int32_t c = 0; c < ncols; c++) seen_as[c] = -1;
    p->bitmap_bytes = (size_t)(nslots > 0 ? (nslots + 7) / 8 : 1);
    p->chunk = chunk > 0 ? chunk : 1;
    p->nchunks = nslots > 0 ? (nslots + p->chunk - 1) / p->chunk : 1;
    p->pool_size = pool_size > 0 ? pool_size : 1;
    size_t entries = (size_t)(ncols < MAX_METRICS ? ncols : MAX_METRICS) * (size_t)p->nchunks;
    p->where = malloc(entries * sizeof(int32_t) + 1);
    p->stored = calloc(entries + 1, 1);
    p->pool = malloc((size_t)p->pool_size * (size_t)p->chunk * sizeof(double));
    p->owner = malloc((size_t)p->pool_size * sizeof(int32_t));
    if (!p->where || !p->stored || !p->pool || !p->owner) {
        p->failure = "out of memory";
        return SF_ERROR;
    }
    memset(p->where, 0xff, entries * sizeof(int32_t));
    p->reread_limit = 4 * (int64_t)entries + 1024;
    memset(p->owner, 0xff, (size_t)p->pool_size * sizeof(int32_t));
    return 0;
}

static int chunk_io(pivot_state *p, int32_t entry, double *buffer, int writing) {
    size_t bytes = (size_t)p->chunk * sizeof(double), done = 0;
    off_t at = (off_t)entry * (off_t)bytes;
    while (done < bytes) {
        ssize_t n = writing ? pwrite(p->fd, (char *)buffer + done, bytes - done, at + (off_t)done)
                            : pread(p->fd, (char *)buffer + done, bytes - done, at + (off_t)done);
        if (n <= 0) return -1;
        done += (size_t)n;
    }
    return 0;
}

/* Write every buffer of the pool to the file (at the end, or when evicting all). */
static int pivot_flush(pivot_state *p) {
    for (int32_t b = 0; b < p->pool_size; b++) {
        int32_t entry = p->owner[b];
        if (entry < 0) continue;
        if (chunk_io(p, entry, p->pool + (size_t)b * (size_t)p->chunk, 1)) {
            p->failure = "cannot write the pivot's temporary file";
            return SF_ERROR;
        }
        p->stored[entry] = 1;
    }
    return 0;
}

static void pivot_free(pivot_state *p) {
    free(p->where);
    free(p->stored);
    free(p->pool);
    free(p->owner);
}

/* The buffer of (column, chunk) ``entry``: kept, read back, or new (zeros); NULL on a failed write/read. */
static double *pivot_chunk(pivot_state *p, int32_t entry) {
    int32_t b = p->where[entry];
    if (b >= 0) return p->pool + (size_t)b * (size_t)p->chunk;
    b = p->victim;
    p->victim = (p->victim + 1) % p->pool_size;
    double *buffer = p->pool + (size_t)b * (size_t)p->chunk;
    int32_t old = p->owner[b];
    if (old >= 0) {
        if (chunk_io(p, old, buffer, 1)) return NULL;
        p->stored[old] = 1;
        p->where[old] = -1;
    }
    if (p->stored[entry]) {
        if (chunk_io(p, entry, buffer, 0)) return NULL;
        p->reread++;
    } else {
        memset(buffer, 0, (size_t)p->chunk * sizeof(double));
    }
    p->owner[b] = entry;
    p->where[entry] = b;
    return buffer;
}

/* One row (task id, metric id, value): 0, or SF_MISMATCH (*bad set), or SF_ERROR (memory, the file). */
static int pivot_row(pivot_state *p, const sf_value *v, int32_t *bad) {
    int b = (v[0].type != SQLITE_INTEGER && v[0].type != SQLITE_NULL) ? 0
            : (v[1].type != SQLITE_INTEGER && v[1].type != SQLITE_NULL) ? 1
            : (v[2].type != SQLITE_INTEGER && v[2].type != SQLITE_FLOAT && v[2].type != SQLITE_NULL) ? 2
            : -1;
    if (b >= 0) {
        *bad = b;
        return SF_MISMATCH;
    }
    if (v[1].type == SQLITE_NULL) return 0;
    if (!p->have_metric || v[1].i != p->last_metric) {
        p->last_metric = v[1].i;
        p->last_col = map_get(p->metrics, v[1].i);
        p->have_metric = 1;
    }
    int32_t col = p->last_col;
    if (col < 0 || col >= p->ncols) return 0;
    if (p->seen_as[col] < 0) {
        if (p->nseen >= MAX_METRICS) {
            *bad = 1; /* more metrics than any profile has: the SQL path reads such a file */
            return SF_MISMATCH;
        }
        if (!(p->valid[col] = calloc(1, p->bitmap_bytes))) {
            p->failure = "out of memory";
            return SF_ERROR;
        }
        p->seen_as[col] = p->nseen++;
    }
    if (v[0].type == SQLITE_NULL || v[2].type == SQLITE_NULL) return 0;
    int32_t slot = map_get(p->tasks, v[0].i);
    if (slot < 0 || slot >= p->nslots) return 0;
    uint8_t bit = (uint8_t)(1u << (slot & 7));
    if (p->valid[col][slot / 8] & bit) return 0; /* a later value of a metric the task already has */
    double *values = pivot_chunk(p, (int32_t)(p->seen_as[col] * p->nchunks + slot / p->chunk));
    if (p->reread > p->reread_limit) return SF_SCATTERED;
    if (!values) {
        p->failure = "cannot use the pivot's temporary file";
        return SF_ERROR;
    }
    p->valid[col][slot / 8] |= bit;
    values[slot % p->chunk] = v[2].type == SQLITE_INTEGER ? (double)v[2].i : v[2].d;
    return 0;
}

/* Set up, run ``next`` over every row, flush: what sf_pivot and sf_raw_pivot share. */
static int64_t pivot_all(int (*next)(void *, sf_value *), void *source, char *err, size_t errlen,
                         const sf_map *tasks, const sf_map *metrics, int64_t nslots, int32_t ncols,
                         uint8_t **valid, int32_t *seen_as, int fd, int64_t chunk, int32_t pool,
                         int32_t *bad_col) {
    pivot_state p;
    int64_t rows = 0;
    int rc = pivot_init(&p, tasks, metrics, nslots, ncols, valid, seen_as, fd, chunk, pool);
    sf_value v[3];
    while (rc == 0) {
        rc = next(source, v);
        if (rc <= 0) break;
        rows++;
        rc = pivot_row(&p, v, bad_col);
    }
    if (rc == 0) rc = pivot_flush(&p);
    if (rc == SF_ERROR && p.failure) snprintf(err, errlen, "%s", p.failure);
    pivot_free(&p);
    return rc < 0 ? rc : rows;
}

static int stmt_next(void *source, sf_value *v) {
    sf_stmt *s = source;
    int rc = next_row(s);
    if (rc <= 0) return rc;
    for (int c = 0; c < 3; c++) stmt_value(s->stmt, c, &v[c]);
    return 1;
}

/* The PMU pivot: rows (task id, metric id, value) of ``s`` in file order; ``tasks`` maps a task id to its
 * slot (0 .. nslots-1), ``metrics`` a metric id to its column (0 .. ncols-1). The first non-null value of
 * each (slot, column) is kept, in the file ``fd`` (laid out as above, the column's place there in
 * ``seen_as[column]``, -1 for a metric not seen; chunks of ``chunk`` slots through a pool of ``pool``
 * buffers) with its bit set in ``valid[column]``: a bitmap of nslots bits allocated (zeroed) when the metric
 * is first seen, whatever its values (the caller gives ncols NULL pointers, and frees with sf_free what was
 * allocated, also after a failure). Rows whose task or metric the maps lack are skipped, as the SQL
 * joins skip them. Returns the rows read, SF_ERROR, or SF_MISMATCH (*bad_col: 0 task id, 1 metric id, 2
 * value). */
int64_t sf_pivot(sf_stmt *s, const sf_map *tasks, const sf_map *metrics, int64_t nslots, int32_t ncols,
                 uint8_t **valid, int32_t *seen_as, int fd, int64_t chunk, int32_t pool, int32_t *bad_col) {
    int64_t rc = pivot_all(stmt_next, s, s->owner->err, sizeof s->owner->err, tasks, metrics, nslots, ncols,
                           valid, seen_as, fd, chunk, pool, bad_col);
    if (rc < 0) s->done = 1;
    return rc;
}

/* ------------------------------------------------------------------------------------ the table reader */
/* One table's rows straight from the file's pages, in rowid order, for the one scan SQLite's virtual
 * machine is slow at (the PMU rows: ~130 ns a row there, a few ns here). It reads the table b-tree as
 * https://www.sqlite.org/fileformat2.html describes it: interior pages (type 5) in order, then the cells of
 * each leaf page (type 13), each a record of serial types and values. Every offset, length and page number
 * is checked against the page and the file; anything this reader does not take (a record spilling to
 * overflow pages, a record with fewer columns than asked for, another page type, a page visited twice, a
 * tree deeper than MAX_DEPTH) stops it with SF_UNSUPPORTED and the caller scans through SQLite instead,
 * which reads such files or says what is wrong with them. Pages are read with pread (through the page
 * cache, as SQLite reads them), a window of pages at a time where they follow each other. */

#define SF_UNSUPPORTED -3
#define MAX_DEPTH 32
#define WINDOW_PAGES 64

typedef struct {
    uint8_t *page; /* a copy: the window moves on while its children are read */
    int32_t ncells, next, ptrs;
    uint32_t right;
} sf_level;

typedef struct {
    int fd;
    int64_t root, npages, visited;
    int32_t page_size, usable;
    double deadline;
    uint8_t *window;
    int64_t window_first, window_count, last_pgno;
    sf_level levels[MAX_DEPTH];
    int depth;
    const uint8_t *leaf; /* inside the window */
    int32_t leaf_cells, leaf_next, leaf_ptrs;
    int interrupted;
    int32_t pivot_cols[3], pivot_need;
    char err[256];
} sf_raw;

static uint32_t be16(const uint8_t *p) { return (uint32_t)p[0] << 8 | p[1]; }
static uint32_t be32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* A varint of at most 9 bytes inside [p, end): its length, 0 if it runs past ``end``. */
static int varint_long(const uint8_t *p, const uint8_t *end, uint64_t *out) {
    uint64_t v = 0;
    for (int i = 0; i < 9; i++) {
        if (p + i >= end) return 0;
        if (i == 8) {
            *out = (v << 8) | p[i];
            return 9;
        }
        v = (v << 7) | (p[i] & 0x7f);
        if (!(p[i] & 0x80)) {
            *out = v;
            return i + 1;
        }
    }
    return 0;
}

/* A varint of at most 9 bytes inside [p, end): its length, 0 if it runs past ``end``. */
static inline int varint(const uint8_t *p, const uint8_t *end, uint64_t *out) {
    if (p < end && p[0] < 0x80) { /* one byte: most lengths and serial types */
        *out = p[0];
        return 1;
    }
    return varint_long(p, end, out);
}

static int raw_fail(sf_raw *r, const char *why) {
    snprintf(r->err, sizeof r->err, "%s", why);
    return SF_UNSUPPORTED;
}

/* Page ``pgno`` (1-based) inside the window, NULL (err set) if unreadable. */
static const uint8_t *raw_page(sf_raw *r, int64_t pgno) {
    if (pgno < 1 || pgno > r->npages) return NULL;
    if (++r->visited > r->npages) return NULL; /* a page reached twice: a cycle */
    if ((r->visited & 255) == 1 && now() > r->deadline) { /* the first page, then every 256 */
        r->interrupted = 1;
        return NULL;
    }
    if (pgno < r->window_first || pgno >= r->window_first + r->window_count) {
        int64_t count = pgno == r->last_pgno + 1 ? WINDOW_PAGES : 1; /* read ahead on a sequential run */
        if (count > r->npages - pgno + 1) count = r->npages - pgno + 1;
        size_t want = (size_t)count * (size_t)r->page_size, got = 0;
        off_t at = (off_t)(pgno - 1) * r->page_size;
        while (got < want) {
            ssize_t n = pread(r->fd, r->window + got, want - got, at + (off_t)got);
            if (n <= 0) break;
            got += (size_t)n;
        }
        if (got < (size_t)r->page_size) return NULL;
        r->window_first = pgno;
        r->window_count = (int64_t)(got / (size_t)r->page_size);
    }
    r->last_pgno = pgno;
    return r->window + (size_t)(pgno - r->window_first) * (size_t)r->page_size;
}

/* Take page ``pgno`` as the next leaf, or push it as an interior level: 0, or SF_UNSUPPORTED. */
static int raw_enter(sf_raw *r, int64_t pgno) {
    const uint8_t *page = raw_page(r, pgno);
    if (!page) return r->interrupted ? SF_ERROR : raw_fail(r, "unreadable page");
    int32_t h = pgno == 1 ? 100 : 0;
    uint8_t type = page[h];
    if (type != 5 && type != 13) return raw_fail(r, "not a table b-tree page");
    int32_t ptrs = h + (type == 5 ? 12 : 8), ncells = (int32_t)be16(page + h + 3);
    if (ptrs + 2 * ncells > r->usable) return raw_fail(r, "cell pointers past the page");
    if (type == 13) {
        r->leaf = page, r->leaf_cells = ncells, r->leaf_next = 0, r->leaf_ptrs = ptrs;
        return 0;
    }
    if (r->depth >= MAX_DEPTH) return raw_fail(r, "b-tree too deep");
    sf_level *lv = &r->levels[r->depth];
    if (!lv->page && !(lv->page = malloc((size_t)r->page_size))) return raw_fail(r, "out of memory");
    memcpy(lv->page, page, (size_t)r->page_size);
    lv->ncells = ncells, lv->next = 0, lv->ptrs = ptrs, lv->right = be32(page + h + 8);
    r->depth++;
    return 0;
}

/* Move to the next leaf: 1, 0 at the end, or a failure. */
static int raw_next_leaf(sf_raw *r) {
    r->leaf = NULL;
    while (r->depth > 0) {
        sf_level *lv = &r->levels[r->depth - 1];
        int64_t child;
        if (lv->next < lv->ncells) {
            uint32_t off = be16(lv->page + lv->ptrs + 2 * lv->next);
            if (off + 4 > (uint32_t)r->usable) return raw_fail(r, "cell past the page");
            child = be32(lv->page + off);
        } else if (lv->next == lv->ncells) {
            child = lv->right;
        } else {
            r->depth--;
            continue;
        }
        lv->next++;
        int rc = raw_enter(r, child);
        if (rc < 0) return rc;
        if (r->leaf) return 1;
    }
    return 0;
}

/* Open ``path`` to read the table whose root page is ``root``: NULL without memory; else check sf_raw_errmsg
 * (empty when it opened). */
sf_raw *sf_raw_open(const char *path, int64_t root, double deadline) {
    sf_raw *r = calloc(1, sizeof(sf_raw));
    if (!r) return NULL;
    r->deadline = deadline;
    r->fd = open(path, O_RDONLY);
    uint8_t head[100];
    if (r->fd < 0 || pread(r->fd, head, 100, 0) != 100) {
        raw_fail(r, "cannot read the header");
        return r;
    }
    uint32_t size = be16(head + 16);
    r->page_size = size == 1 ? 65536 : (int32_t)size;
    r->usable = r->page_size - head[20];
    if (r->page_size < 512 || (r->page_size & (r->page_size - 1)) || r->usable < 480) {
        raw_fail(r, "unusual page size");
        return r;
    }
    if (be32(head + 56) > 1) {
        raw_fail(r, "text in UTF-16"); /* SQLite converts it; this reader takes UTF-8 only */
        return r;
    }
    off_t bytes = lseek(r->fd, 0, SEEK_END);
    r->npages = bytes > 0 ? (int64_t)(bytes / r->page_size) : 0;
    uint32_t in_header = be32(head + 28);
    if (in_header > 0 && be32(head + 92) == be32(head + 24) && in_header < r->npages) r->npages = in_header;
    r->window = malloc((size_t)WINDOW_PAGES * (size_t)r->page_size);
    if (!r->window) {
        raw_fail(r, "out of memory");
        return r;
    }
    r->last_pgno = -1;
    r->root = root;
    if (raw_enter(r, root) < 0 && r->interrupted) snprintf(r->err, sizeof r->err, "interrupted");
    return r;
}

/* Start again at the first row whose rowid is at least ``rowid`` (interior cells hold the largest rowid of
 * their left child): 0, or a failure as sf_raw_errmsg then says. */
int sf_raw_seek(sf_raw *r, int64_t rowid) {
    if (r->err[0]) return r->interrupted ? SF_ERROR : SF_UNSUPPORTED;
    r->depth = 0, r->leaf = NULL;
    int64_t pgno = r->root;
    for (;;) {
        int rc = raw_enter(r, pgno);
        if (rc < 0) {
            if (r->interrupted) snprintf(r->err, sizeof r->err, "interrupted");
            return rc;
        }
        if (r->leaf) break;
        sf_level *lv = &r->levels[r->depth - 1];
        pgno = lv->right;
        lv->next = lv->ncells + 1; /* past the rightmost child, unless a cell's child holds the rowid */
        for (int32_t i = 0; i < lv->ncells; i++) {
            uint32_t off = be16(lv->page + lv->ptrs + 2 * i);
            uint64_t key;
            if (off + 4 >= (uint32_t)r->usable || !varint(lv->page + off + 4, lv->page + r->usable, &key))
                return raw_fail(r, "cell past the page");
            if ((int64_t)key >= rowid) {
                pgno = be32(lv->page + off);
                lv->next = i + 1;
                break;
            }
        }
    }
    const uint8_t *end = r->leaf + r->usable;
    for (; r->leaf_next < r->leaf_cells; r->leaf_next++) {
        uint32_t off = be16(r->leaf + r->leaf_ptrs + 2 * r->leaf_next);
        uint64_t payload, key;
        int k = off < (uint32_t)r->usable ? varint(r->leaf + off, end, &payload) : 0;
        if (!k || !varint(r->leaf + off + k, end, &key)) return raw_fail(r, "cell past the page");
        if ((int64_t)key >= rowid) break;
    }
    return 0;
}

const char *sf_raw_errmsg(const sf_raw *r) { return r->err; }

void sf_raw_close(sf_raw *r) {
    if (!r) return;
    if (r->fd >= 0) close(r->fd);
    for (int i = 0; i < MAX_DEPTH; i++) free(r->levels[i].page);
    free(r->window);
    free(r);
}

#define MAX_READ_COLUMNS 64 /* record positions read: the profiler's tables have a dozen columns */

/* A big-endian two's complement integer of serial type 1..6 (1, 2, 3, 4, 6 or 8 bytes). */
static int64_t stored_int(const uint8_t *a, uint64_t len) {
    int64_t x = (a[0] & 0x80) ? -1 : 0; /* sign-extended */
    for (uint64_t b = 0; b < len; b++) x = (int64_t)((uint64_t)x << 8 | a[b]);
    return x;
}

/* Columns ``cols[0..n)`` of the next row into ``out`` (-1: the rowid); ``need``: 1 + the largest position
 * (at most MAX_READ_COLUMNS; the serial types past it are not read). 1, 0 at the end, SF_UNSUPPORTED, or
 * SF_ERROR when past the deadline (err "interrupted", as SQLite says it). */
static int raw_row(sf_raw *r, int n, const int32_t *cols, int32_t need, sf_value *out) {
    while (!r->leaf || r->leaf_next >= r->leaf_cells) {
        int rc = raw_next_leaf(r);
        if (rc <= 0) {
            if (r->interrupted) {
                snprintf(r->err, sizeof r->err, "interrupted");
                return SF_ERROR;
            }
            return rc;
        }
    }
    const uint8_t *page = r->leaf, *end = r->leaf + r->usable;
    uint32_t off = be16(page + r->leaf_ptrs + 2 * r->leaf_next++);
    if (off >= (uint32_t)r->usable) return raw_fail(r, "cell past the page");
    const uint8_t *p = page + off;
    uint64_t payload, rowid, header;
    int k = varint(p, end, &payload);
    if (!k) return raw_fail(r, "cell past the page");
    p += k;
    if (!(k = varint(p, end, &rowid))) return raw_fail(r, "cell past the page");
    p += k;
    if (payload > (uint64_t)(r->usable - 35)) return raw_fail(r, "record on overflow pages");
    if (payload > (uint64_t)(end - p)) return raw_fail(r, "record past the page");
    const uint8_t *rec = p, *rec_end = p + payload;
    if (!(k = varint(rec, rec_end, &header)) || header > payload) return raw_fail(r, "bad record header");
    const uint8_t *types = rec + k, *types_end = rec + header, *value = rec + header;
    static const uint8_t int_bytes[10] = {0, 1, 2, 3, 4, 6, 8, 8, 0, 0};
    uint64_t st[MAX_READ_COLUMNS];
    const uint8_t *at[MAX_READ_COLUMNS];
    int32_t found = 0;
    for (; found < need && types < types_end; found++) {
        uint64_t t;
        if (!(k = varint(types, types_end, &t))) return raw_fail(r, "bad record header");
        types += k;
        uint64_t len = t >= 12 ? (t - 12) / 2 : (t == 10 || t == 11) ? UINT64_MAX : int_bytes[t];
        if (len > (uint64_t)(rec_end - value)) return raw_fail(r, "value past the record");
        st[found] = t, at[found] = value;
        value += len;
    }
    for (int c = 0; c < n; c++) {
        sf_value *v = &out[c];
        int32_t col = cols[c];
        if (col < 0) {
            v->type = SQLITE_INTEGER, v->i = (int64_t)rowid;
            continue;
        }
        if (col >= found) return raw_fail(r, "record with fewer columns"); /* a default would apply */
        uint64_t t = st[col];
        const uint8_t *a = at[col];
        if (t == 0) {
            v->type = SQLITE_NULL;
        } else if (t <= 6) {
            v->type = SQLITE_INTEGER, v->i = stored_int(a, int_bytes[t]);
        } else if (t == 7) {
            uint64_t bits = 0;
            for (int b = 0; b < 8; b++) bits = bits << 8 | a[b];
            memcpy(&v->d, &bits, 8);
            v->type = v->d != v->d ? SQLITE_NULL : SQLITE_FLOAT; /* SQLite reads a stored NaN as NULL */
        } else if (t == 8 || t == 9) {
            v->type = SQLITE_INTEGER, v->i = (int64_t)(t - 8);
        } else {
            v->type = (t & 1) ? SQLITE_TEXT : SQLITE_BLOB, v->text = a, v->bytes = (int64_t)((t - 12) / 2);
        }
    }
    return 1;
}

static int raw_next3(void *source, sf_value *v) {
    sf_raw *r = source;
    return raw_row(r, 3, r->pivot_cols, r->pivot_need, v);
}

/* sf_pivot over the rows of an open table reader; ``cols``: the record positions of (task id, metric id,
 * value). Returns as sf_pivot, or SF_UNSUPPORTED (then nothing is decided: scan with sf_pivot instead). */
int64_t sf_raw_pivot(sf_raw *r, const int32_t *cols, const sf_map *tasks, const sf_map *metrics,
                     int64_t nslots, int32_t ncols, uint8_t **valid, int32_t *seen_as, int fd,
                     int64_t chunk, int32_t pool, int32_t *bad_col) {
    if (r->err[0]) return r->interrupted ? SF_ERROR : SF_UNSUPPORTED;
    memcpy(r->pivot_cols, cols, sizeof r->pivot_cols);
    r->pivot_need = 0;
    for (int c = 0; c < 3; c++)
        if (cols[c] + 1 > r->pivot_need) r->pivot_need = cols[c] + 1;
    if (r->pivot_need > MAX_READ_COLUMNS) return raw_fail(r, "a column past the ones read");
    return pivot_all(raw_next3, r, r->err, sizeof r->err, tasks, metrics, nslots, ncols, valid, seen_as, fd,
                     chunk, pool, bad_col);
}

/* Up to ``cap`` rows of an open table reader into column buffers, as sf_fetch does; ``cols[c]``: the record
 * position of column c (-1: the rowid). Returns as sf_fetch, or SF_UNSUPPORTED (then read through SQLite:
 * rows already given are not given again by the reader). */
int64_t sf_raw_fetch(sf_raw *r, int ncols, const int32_t *cols, const int32_t *kinds, sf_map *const *maps,
                     void *const *data, uint8_t *const *valid, int64_t *nulls, int64_t cap,
                     int32_t *bad_col) {
    if (r->err[0]) return r->interrupted ? SF_ERROR : SF_UNSUPPORTED;
    int32_t need = 0;
    for (int c = 0; c < ncols; c++)
        if (cols[c] + 1 > need) need = cols[c] + 1;
    if (ncols > MAX_READ_COLUMNS || need > MAX_READ_COLUMNS)
        return raw_fail(r, "a column past the ones read");
    for (int c = 0; c < ncols; c++) {
        memset(valid[c], 0, (size_t)((cap + 7) / 8));
        nulls[c] = 0;
    }
    sf_value v[MAX_READ_COLUMNS];
    int64_t row = 0;
    while (row < cap) {
        int rc = raw_row(r, ncols, cols, need, v);
        if (rc < 0) return rc;
        if (rc == 0) break;
        for (int c = 0; c < ncols; c++) {
            if (!put(&v[c], kinds[c], maps[c], data[c], valid[c], &nulls[c], row)) {
                *bad_col = c;
                return SF_MISMATCH;
            }
        }
        row++;
    }
    return row;
}
