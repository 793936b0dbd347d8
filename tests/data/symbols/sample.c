#include <stdio.h>

#define MAX(a, b) ((a) > (b) ? (a) : (b))

struct point {
    int x;
    int y;
};

typedef struct node {
    struct node *next;
} node_t;

typedef struct {
    int id;
} anon_t;

enum color { RED, GREEN };

union value { int i; float f; };

static int helper(int x);
char *dup(const char *s);
int (*callback)(int);

int helper(int x)
{
    int local(int);
    return x + 1;
}

static const char **
names(void)
{
    return NULL;
}
