/*
 * A mixed program for loopscope's profiling benchmark (bench/profile_overhead.sh): several
 * phases of the kinds a real application mixes, so a profiler meets libc callbacks, hashing,
 * a dense loop nest, deep recursion and byte-wise string loops in one run.
 *
 *   mixed [SCALE]     SCALE 1..100000 (default 2000); the work of every phase grows with it
 *
 * Phases, each timed and printed with a checksum so no work can be optimised away:
 *   sort    records sorted by qsort with a three-key comparator (calls back from libc)
 *   hash    words of a skewed vocabulary counted in a chained hash table of strings
 *   matmul  repeated dense 48x48 double matrix products (i-k-j order)
 *   tree    a random binary search tree built, then walked recursively several times
 *   text    generated prose: words counted, sentences capitalised, words reversed in place
 */
#define _POSIX_C_SOURCE 199309L /* clock_gettime under -std=c11 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint64_t rng_state = 0x9e3779b97f4a7c15u;

/* xorshift64*: deterministic, so every run does identical work. */
static uint64_t next_random(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545f4914f6cdd1du;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void *checked_malloc(size_t bytes)
{
    void *block = malloc(bytes);
    if (block == NULL) {
        fprintf(stderr, "mixed: out of memory (%zu bytes)\n", bytes);
        exit(1);
    }
    return block;
}

/* ---- sort ---------------------------------------------------------------------------- */

struct record {
    uint32_t group;
    uint32_t id;
    double key;
};

/* Group ascending, then key descending, then id ascending. */
static int compare_records(const void *left, const void *right)
{
    const struct record *x = left, *y = right;
    if (x->group != y->group)
        return x->group < y->group ? -1 : 1;
    if (x->key != y->key)
        return x->key > y->key ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

uint64_t phase_sort(long scale)
{
    size_t count = 250 * (size_t)scale;
    struct record *records = checked_malloc(count * sizeof *records);
    uint64_t checksum = 0;
    for (int round = 0; round < 2; round++) {
        for (size_t n = 0; n < count; n++) {
            uint64_t r = next_random();
            records[n].group = (uint32_t)(r % 64);
            records[n].id = (uint32_t)n;
            records[n].key = (double)(r >> 11) * 0x1p-53;
        }
        qsort(records, count, sizeof *records, compare_records);
        for (size_t n = 1; n < count; n++) {
            if (compare_records(&records[n - 1], &records[n]) > 0) {
                fprintf(stderr, "mixed: sort left records %zu and %zu out of order\n", n - 1, n);
                exit(1);
            }
        }
        for (size_t n = 0; n < count; n += count / 97 + 1)
            checksum = checksum * 31 + records[n].id;
    }
    free(records);
    return checksum;
}

/* ---- hash ---------------------------------------------------------------------------- */

struct entry {
    struct entry *next;
    uint64_t hash;
    uint32_t count;
    uint32_t length;
    char text[];
};

struct table {
    struct entry **buckets;
    size_t mask;
    size_t distinct;
};

static uint64_t fnv1a(const char *text, size_t length)
{
    uint64_t hash = 0xcbf29ce484222325u;
    for (size_t n = 0; n < length; n++) {
        hash ^= (unsigned char)text[n];
        hash *= 0x100000001b3u;
    }
    return hash;
}

/* The word spelled for a vocabulary index: base-26 letters padded by a length from the
 * index, so the same index always gives the same word. */
static size_t spell_word(uint64_t index, char *out)
{
    size_t length = 3 + (size_t)(index * 2654435761u % 9);
    uint64_t digits = index * 0x9e3779b97f4a7c15u;
    for (size_t n = 0; n < length; n++) {
        out[n] = (char)('a' + digits % 26);
        digits = digits / 26 + index;
    }
    out[length] = '\0';
    return length;
}

/* A skewed draw: small indices are much more frequent, as words in text are. */
static uint64_t skewed_index(uint64_t vocabulary)
{
    uint64_t bound = next_random() % vocabulary + 1;
    return next_random() % bound;
}

static struct entry *find_or_add(struct table *table, const char *text, size_t length, int add)
{
    uint64_t hash = fnv1a(text, length);
    struct entry **slot = &table->buckets[hash & table->mask];
    for (struct entry *e = *slot; e != NULL; e = e->next) {
        if (e->hash == hash && e->length == length && memcmp(e->text, text, length) == 0)
            return e;
    }
    if (!add)
        return NULL;
    struct entry *e = checked_malloc(sizeof *e + length + 1);
    e->next = *slot;
    e->hash = hash;
    e->count = 0;
    e->length = (uint32_t)length;
    memcpy(e->text, text, length + 1);
    *slot = e;
    table->distinct++;
    return e;
}

uint64_t phase_hash(long scale)
{
    size_t words = 800 * (size_t)scale;
    uint64_t vocabulary = 60 * (uint64_t)scale + 16;
    struct table table = { 0 };
    size_t buckets = 1;
    while (buckets < vocabulary / 2)
        buckets <<= 1;
    table.buckets = calloc(buckets, sizeof *table.buckets);
    if (table.buckets == NULL) {
        fprintf(stderr, "mixed: out of memory (hash buckets)\n");
        exit(1);
    }
    table.mask = buckets - 1;
    char word[16];
    for (size_t n = 0; n < words; n++) {
        size_t length = spell_word(skewed_index(vocabulary), word);
        find_or_add(&table, word, length, 1)->count++;
    }
    uint64_t found = 0, most = 0;
    for (size_t n = 0; n < words / 2; n++) {
        size_t length = spell_word(next_random() % (2 * vocabulary), word);
        struct entry *e = find_or_add(&table, word, length, 0);
        if (e != NULL) {
            found++;
            if (e->count > most)
                most = e->count;
        }
    }
    for (size_t b = 0; b < buckets; b++) {
        struct entry *e = table.buckets[b];
        while (e != NULL) {
            struct entry *next = e->next;
            free(e);
            e = next;
        }
    }
    free(table.buckets);
    return (uint64_t)table.distinct * 1000003u + found * 31 + most;
}

/* ---- matmul -------------------------------------------------------------------------- */

#define DIM 48
static double mat_a[DIM][DIM], mat_b[DIM][DIM], mat_c[DIM][DIM];

void multiply(void)
{
    for (int i = 0; i < DIM; i++) {
        for (int j = 0; j < DIM; j++)
            mat_c[i][j] = 0.0;
        for (int k = 0; k < DIM; k++) {
            double aik = mat_a[i][k];
            for (int j = 0; j < DIM; j++)
                mat_c[i][j] += aik * mat_b[k][j];
        }
    }
}

uint64_t phase_matmul(long scale)
{
    for (int i = 0; i < DIM; i++) {
        for (int j = 0; j < DIM; j++) {
            mat_a[i][j] = (double)((i * 7 + j * 3) % 11) / 11.0;
            mat_b[i][j] = (double)((i * 5 + j * 13) % 17) / 17.0 - 0.5;
        }
    }
    long products = 3 * scale;
    double trace = 0.0;
    for (long r = 0; r < products; r++) {
        multiply();
        /* Feed a result back so the products cannot be hoisted or merged. */
        mat_a[r % DIM][(r / DIM) % DIM] += mat_c[(r * 5) % DIM][(r * 11) % DIM] * 1e-6;
        trace += mat_c[r % DIM][r % DIM];
    }
    return (uint64_t)(int64_t)(trace * 1e6);
}

/* ---- tree ---------------------------------------------------------------------------- */

struct node {
    uint32_t key;
    struct node *left, *right;
};

static void insert_node(struct node **root, struct node *fresh)
{
    struct node **at = root;
    while (*at != NULL)
        at = fresh->key < (*at)->key ? &(*at)->left : &(*at)->right;
    *at = fresh;
}

/* Sum of key times depth over the subtree, and its height through *height. */
uint64_t walk(const struct node *node, uint32_t depth, uint32_t *height)
{
    if (node == NULL) {
        *height = 0;
        return 0;
    }
    uint32_t left_height, right_height;
    uint64_t sum = (uint64_t)node->key * depth;
    sum += walk(node->left, depth + 1, &left_height);
    sum += walk(node->right, depth + 1, &right_height);
    *height = 1 + (left_height > right_height ? left_height : right_height);
    return sum;
}

uint64_t phase_tree(long scale)
{
    size_t count = 300 * (size_t)scale;
    struct node *pool = checked_malloc(count * sizeof *pool);
    struct node *root = NULL;
    for (size_t n = 0; n < count; n++) {
        pool[n].key = (uint32_t)next_random();
        pool[n].left = pool[n].right = NULL;
        insert_node(&root, &pool[n]);
    }
    uint64_t checksum = 0;
    uint32_t height = 0;
    for (int pass = 0; pass < 6; pass++)
        checksum += walk(root, (uint32_t)pass + 1, &height);
    free(pool);
    return checksum ^ height;
}

/* ---- text ---------------------------------------------------------------------------- */

static const char *const syllables[] = {
    "ka", "ri", "mo", "sen", "ta", "lo", "vi", "nu", "per", "da", "qui", "et", "or", "al",
};

static size_t generate_text(char *text, size_t capacity)
{
    size_t at = 0;
    while (at + 32 < capacity) {
        int parts = 1 + (int)(next_random() % 3);
        for (int s = 0; s < parts; s++) {
            const char *syllable = syllables[next_random() % (sizeof syllables / sizeof *syllables)];
            while (*syllable != '\0')
                text[at++] = *syllable++;
        }
        uint64_t r = next_random() % 20;
        text[at++] = r == 0 ? '.' : r == 1 ? ',' : r == 2 ? '\n' : ' ';
        if (r < 2)
            text[at++] = ' ';
    }
    text[at] = '\0';
    return at;
}

struct text_counts {
    uint64_t words, sentences, vowels, lines;
};

static int is_letter(char ch)
{
    return ch >= 'a' && ch <= 'z';
}

void process_text(char *text, size_t length, struct text_counts *counts)
{
    int sentence_start = 1;
    size_t n = 0;
    while (n < length) {
        if (!is_letter(text[n]) && !(text[n] >= 'A' && text[n] <= 'Z')) {
            if (text[n] == '.')
                counts->sentences++, sentence_start = 1;
            else if (text[n] == '\n')
                counts->lines++;
            n++;
            continue;
        }
        size_t start = n;
        while (n < length && (is_letter(text[n]) || (text[n] >= 'A' && text[n] <= 'Z'))) {
            char lower = text[n] | 0x20;
            counts->vowels += lower == 'a' || lower == 'e' || lower == 'i' || lower == 'o'
                || lower == 'u';
            n++;
        }
        counts->words++;
        for (size_t lo = start, hi = n - 1; lo < hi; lo++, hi--) {
            char swap = text[lo];
            text[lo] = text[hi];
            text[hi] = swap;
        }
        if (sentence_start)
            text[start] = (char)(text[start] & ~0x20);
        sentence_start = 0;
    }
}

uint64_t phase_text(long scale)
{
    size_t capacity = 4000 * (size_t)scale + 64;
    char *text = checked_malloc(capacity);
    size_t length = generate_text(text, capacity);
    struct text_counts counts = { 0 };
    for (int pass = 0; pass < 3; pass++)
        process_text(text, length, &counts);
    uint64_t checksum = fnv1a(text, length);
    free(text);
    return checksum ^ (counts.words * 7 + counts.sentences * 11 + counts.vowels * 13 + counts.lines);
}

/* ---- driver -------------------------------------------------------------------------- */

int main(int argc, char **argv)
{
    long scale = 2000;
    if (argc > 2) {
        fprintf(stderr, "usage: %s [SCALE (1..100000)]\n", argv[0]);
        return 2;
    }
    if (argc == 2) {
        char *end;
        scale = strtol(argv[1], &end, 10);
        if (*end != '\0' || scale < 1 || scale > 100000) {
            fprintf(stderr, "%s: SCALE must be an integer in 1..100000, not '%s'\n", argv[0],
                    argv[1]);
            return 2;
        }
    }
    static const struct {
        const char *name;
        uint64_t (*run)(long);
    } phases[] = {
        { "sort", phase_sort }, { "hash", phase_hash }, { "matmul", phase_matmul },
        { "tree", phase_tree }, { "text", phase_text },
    };
    double total = 0.0;
    for (size_t p = 0; p < sizeof phases / sizeof *phases; p++) {
        double start = now_s();
        uint64_t checksum = phases[p].run(scale);
        double seconds = now_s() - start;
        total += seconds;
        printf("%-7s %9.6f s  checksum %016llx\n", phases[p].name, seconds,
               (unsigned long long)checksum);
    }
    printf("total   %9.6f s  scale %ld\n", total, scale);
    return 0;
}
