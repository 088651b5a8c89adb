/* SPDX-License-Identifier: MIT */
/*
 * Rules of rule-based subscribers: a small expression language over the
 * attributes of a message (mfsq.h, "Rules", is the user's manual). A rule is
 * parsed and checked once, when the subscriber is created, into a postfix
 * program; the dequeue runs it on every message it passes, on the header
 * only, before any payload is copied.
 *
 *   rule   := or
 *   or     := and { "||" and }
 *   and    := unary { "&&" unary }
 *   unary  := "!" unary | "(" or ")" | "true" | "false" | test
 *   test   := FLAG | ATTR cmp value | ATTR "in" "(" value { "," value } ")"
 *   cmp    := "==" | "!=" | "<" | "<=" | ">" | ">="
 *   value  := (decimal | "0x" hex) [unit]
 *
 * The parser is recursive descent with a depth limit, so no rule can run
 * the stack out; the program's stack depth is computed while emitting.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define RULE_DEPTH   32	 /* nesting of "(" and "!" */
#define RULE_IN_MAX  64	 /* values in one "in" list */
#define RULE_INS_MAX 512 /* instructions (a 1 KiB rule needs fewer) */

enum attr_id {
	A_PRIO,
	A_ENQ,
	A_SIZE,
	A_SHARD,
	A_SEQ,
	A_TAG,
	A_ENQ_US,
	A_DLV_US,
	A_EXP_US,
	A_AGE,
	A_DELAYED,
	A_BUFFERED
};
enum attr_type { T_NUM, T_PRIO, T_SIZE, T_TIME, T_FLAG };

static const struct attr {
	const char *name;
	enum attr_id id;
	enum attr_type type;
} attrs[] = {
    {"priority", A_PRIO, T_PRIO},
    {"prio", A_PRIO, T_PRIO},
    {"enqueuer", A_ENQ, T_NUM},
    {"size", A_SIZE, T_SIZE},
    {"shard", A_SHARD, T_NUM},
    {"seq", A_SEQ, T_NUM},
    {"tag", A_TAG, T_NUM},
    {"enqueue_us", A_ENQ_US, T_TIME},
    {"deliver_us", A_DLV_US, T_TIME},
    {"expire_us", A_EXP_US, T_TIME},
    {"age", A_AGE, T_TIME},
    {"delayed", A_DELAYED, T_FLAG},
    {"buffered", A_BUFFERED, T_FLAG},
};

static const struct unit {
	const char *name;
	enum attr_type type;
	uint64_t mul;
} units[] = {
    {"us", T_TIME, 1},
    {"ms", T_TIME, 1000},
    {"s", T_TIME, 1000000},
    {"min", T_TIME, 60000000},
    {"h", T_TIME, 3600000000ull},
    {"d", T_TIME, 86400000000ull},
    {"B", T_SIZE, 1},
    {"KiB", T_SIZE, 1024},
    {"MiB", T_SIZE, 1048576},
    {"GiB", T_SIZE, 1073741824ull},
};

enum ins_kind { I_CMP, I_IN, I_FLAG, I_CONST, I_NOT, I_AND, I_OR };
enum cmp_op { C_EQ, C_NE, C_LT, C_LE, C_GT, C_GE };

struct ins {
	uint8_t kind, attr, cmp;
	uint16_t nvals; /* I_IN: values at rule->vals[v] */
	uint64_t v;	/* I_CMP: the value; I_IN: index; I_CONST: 0/1 */
};

struct mfsq_rule {
	unsigned n, nvals;
	struct ins code[RULE_INS_MAX];
	uint64_t vals[RULE_INS_MAX];
	char text[]; /* as given */
};

struct parser {
	const char *s, *p;
	struct mfsq_rule *r;
	unsigned depth;
	char *why;
	size_t whylen;
	int failed;
};

static int fail(struct parser *ps, const char *at, const char *fmt, ...)
{
	va_list ap;
	int k;

	if (ps->failed)
		return EINVAL;
	ps->failed = 1;
	if (!ps->why || !ps->whylen)
		return EINVAL;
	k = snprintf(ps->why, ps->whylen, "column %d: ", (int)(at - ps->s) + 1);
	if (k >= 0 && (size_t)k < ps->whylen) {
		va_start(ap, fmt);
		vsnprintf(ps->why + k, ps->whylen - (size_t)k, fmt, ap);
		va_end(ap);
	}
	return EINVAL;
}

static void skip_space(struct parser *ps)
{
	while (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r')
		ps->p++;
}

static int is_alpha(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static int is_digit(char c)
{
	return c >= '0' && c <= '9';
}

/* Length of the identifier at p (letters, digits, '_'; not starting with a digit). */
static size_t ident_len(const char *p)
{
	size_t n = 0;

	if (!is_alpha(*p))
		return 0;
	while (is_alpha(p[n]) || is_digit(p[n]))
		n++;
	return n;
}

static int accept(struct parser *ps, const char *tok)
{
	size_t n = strlen(tok);

	skip_space(ps);
	if (strncmp(ps->p, tok, n))
		return 0;
	if (is_alpha(tok[0]) && (is_alpha(ps->p[n]) || is_digit(ps->p[n])))
		return 0; /* "true" is not a prefix of "trueish" */
	ps->p += n;
	return 1;
}

/* Append an instruction; the evaluation stack never holds more values than
 * there are instructions, so RULE_INS_MAX bounds it too. */
static int emit(struct parser *ps, struct ins in)
{
	struct mfsq_rule *r = ps->r;

	if (r->n == RULE_INS_MAX)
		return fail(ps, ps->p, "rule too long (more than %d terms)", RULE_INS_MAX);
	r->code[r->n++] = in;
	return 0;
}

static const char *type_name(enum attr_type t)
{
	switch (t) {
	case T_TIME:
		return "a time (us, ms, s, min, h, d)";
	case T_SIZE:
		return "a size (B, KiB, MiB, GiB)";
	default:
		return "a plain number";
	}
}

static int value(struct parser *ps, const struct attr *a, uint64_t *out)
{
	const char *at, *q;
	uint64_t v = 0;
	int base = 10, nd = 0;
	size_t ul;

	skip_space(ps);
	at = q = ps->p;
	if (q[0] == '0' && (q[1] == 'x' || q[1] == 'X')) {
		base = 16;
		q += 2;
	}
	for (;; q++, nd++) {
		unsigned d;

		if (is_digit(*q))
			d = (unsigned)(*q - '0');
		else if (base == 16 && *q >= 'a' && *q <= 'f')
			d = (unsigned)(*q - 'a' + 10);
		else if (base == 16 && *q >= 'A' && *q <= 'F')
			d = (unsigned)(*q - 'A' + 10);
		else
			break;
		if (v > (UINT64_MAX - d) / (uint64_t)base)
			return fail(ps, at, "number out of range (at most %llu)",
				    (unsigned long long)UINT64_MAX);
		v = v * (uint64_t)base + d;
	}
	if (!nd)
		return fail(ps, at, "expected a number after '%s ...'", a->name);
	ul = base == 10 ? ident_len(q) : 0;
	if (!ul && (is_alpha(*q) || is_digit(*q)))
		return fail(ps, q, "unexpected character '%c' in a number", *q);
	if (ul) {
		const struct unit *u = NULL;

		for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
			if (strlen(units[i].name) == ul && !strncmp(units[i].name, q, ul))
				u = &units[i];
		if (!u)
			return fail(ps, q, "unknown unit '%.*s' (%s takes %s)", (int)ul, q, a->name,
				    type_name(a->type));
		if (u->type != a->type)
			return fail(ps, q, "unit '%s' does not fit %s: it takes %s", u->name,
				    a->name, type_name(a->type));
		if (v > UINT64_MAX / u->mul)
			return fail(ps, at, "number out of range once in %s",
				    u->type == T_TIME ? "microseconds" : "bytes");
		v *= u->mul;
		q += ul;
	}
	if (a->type == T_PRIO && v > MFSQ_PRIO_MAX)
		return fail(ps, at, "priority is 0..%d, not %llu", MFSQ_PRIO_MAX,
			    (unsigned long long)v);
	ps->p = q;
	*out = v;
	return 0;
}

static int parse_or(struct parser *ps);

static int test(struct parser *ps)
{
	static const struct {
		const char *tok;
		enum cmp_op op;
	} cmps[] = {{"==", C_EQ}, {"!=", C_NE}, {"<=", C_LE},
		    {">=", C_GE}, {"<", C_LT},	{">", C_GT}};
	const struct attr *a = NULL;
	const char *at;
	size_t n;
	uint64_t v;
	int rc;

	skip_space(ps);
	at = ps->p;
	n = ident_len(at);
	if (!n) {
		if (!*at)
			return fail(ps, at, "unexpected end of rule: expected an attribute");
		return fail(ps, at, "expected an attribute, '!' or '(' at '%.10s'", at);
	}
	for (size_t i = 0; i < sizeof(attrs) / sizeof(attrs[0]); i++)
		if (strlen(attrs[i].name) == n && !strncmp(attrs[i].name, at, n))
			a = &attrs[i];
	if (!a)
		return fail(ps, at,
			    "unknown attribute '%.*s' (priority, enqueuer, size, shard, seq, "
			    "tag, enqueue_us, deliver_us, expire_us, age, delayed, buffered)",
			    (int)n, at);
	ps->p += n;
	if (a->type == T_FLAG) {
		skip_space(ps);
		for (size_t i = 0; i < sizeof(cmps) / sizeof(cmps[0]); i++)
			if (!strncmp(ps->p, cmps[i].tok, strlen(cmps[i].tok)))
				return fail(ps, ps->p,
					    "%s is a condition by itself: write '%s' "
					    "or '!%s'",
					    a->name, a->name, a->name);
		return emit(ps, (struct ins){.kind = I_FLAG, .attr = (uint8_t)a->id});
	}
	if (accept(ps, "in")) {
		struct mfsq_rule *r = ps->r;
		unsigned first = r->nvals, k = 0;

		if (!accept(ps, "("))
			return fail(ps, ps->p, "expected '(' after 'in'");
		do {
			if (k == RULE_IN_MAX)
				return fail(ps, ps->p, "more than %d values in one 'in' list",
					    RULE_IN_MAX);
			if ((rc = value(ps, a, &v)))
				return rc;
			if (r->nvals == RULE_INS_MAX)
				return fail(ps, ps->p, "rule too long");
			r->vals[r->nvals++] = v;
			k++;
		} while (accept(ps, ","));
		if (!accept(ps, ")"))
			return fail(ps, ps->p, "expected ',' or ')' in the 'in' list");
		return emit(ps, (struct ins){.kind = I_IN,
					     .attr = (uint8_t)a->id,
					     .nvals = (uint16_t)k,
					     .v = first});
	}
	skip_space(ps);
	for (size_t i = 0; i < sizeof(cmps) / sizeof(cmps[0]); i++) {
		if (!accept(ps, cmps[i].tok))
			continue;
		if ((rc = value(ps, a, &v)))
			return rc;
		return emit(ps, (struct ins){.kind = I_CMP,
					     .attr = (uint8_t)a->id,
					     .cmp = (uint8_t)cmps[i].op,
					     .v = v});
	}
	if (*ps->p == '=')
		return fail(ps, ps->p, "'=' is not an operator: write '=='");
	return fail(ps, ps->p, "expected ==, !=, <, <=, >, >= or 'in' after '%s'", a->name);
}

static int unary(struct parser *ps)
{
	int rc;

	if (accept(ps, "!")) {
		if (++ps->depth > RULE_DEPTH)
			return fail(ps, ps->p - 1, "nested deeper than %d", RULE_DEPTH);
		if (!(rc = unary(ps)))
			rc = emit(ps, (struct ins){.kind = I_NOT});
		ps->depth--;
	} else if (accept(ps, "(")) {
		const char *open = ps->p - 1;

		if (++ps->depth > RULE_DEPTH)
			return fail(ps, open, "nested deeper than %d", RULE_DEPTH);
		rc = parse_or(ps);
		ps->depth--;
		if (!rc && !accept(ps, ")"))
			rc = fail(ps, ps->p,
				  *ps->p ? "expected ')' to close the '(' at column %d"
					 : "missing ')' for the '(' at column %d",
				  (int)(open - ps->s) + 1);
	} else if (accept(ps, "true")) {
		rc = emit(ps, (struct ins){.kind = I_CONST, .v = 1});
	} else if (accept(ps, "false")) {
		rc = emit(ps, (struct ins){.kind = I_CONST, .v = 0});
	} else {
		rc = test(ps);
	}
	return rc;
}

static int parse_and(struct parser *ps)
{
	int rc = unary(ps);

	while (!rc && accept(ps, "&&"))
		if (!(rc = unary(ps)))
			rc = emit(ps, (struct ins){.kind = I_AND});
	return rc;
}

static int parse_or(struct parser *ps)
{
	int rc = parse_and(ps);

	while (!rc && accept(ps, "||"))
		if (!(rc = parse_and(ps)))
			rc = emit(ps, (struct ins){.kind = I_OR});
	return rc;
}

int mfsq_rule_compile(const char *text, struct mfsq_rule **out, char *why, size_t whylen)
{
	struct parser ps = {.s = text, .p = text, .why = why, .whylen = whylen};
	size_t len;
	int rc;

	*out = NULL;
	if (why && whylen)
		why[0] = 0;
	if (!text) {
		if (why && whylen)
			snprintf(why, whylen, "no rule");
		return EINVAL;
	}
	len = strnlen(text, MFSQ_RULE_MAX + 1);
	if (len > MFSQ_RULE_MAX)
		return fail(&ps, text, "rule longer than %d bytes", MFSQ_RULE_MAX);
	ps.r = calloc(1, sizeof(*ps.r) + len + 1);
	if (!ps.r)
		return ENOMEM;
	memcpy(ps.r->text, text, len);
	skip_space(&ps);
	if (!*ps.p) {
		free(ps.r);
		return fail(&ps, ps.p, "empty rule (a rule that takes everything is 'true')");
	}
	rc = parse_or(&ps);
	if (!rc) {
		skip_space(&ps);
		if (*ps.p == '=' || *ps.p == '&' || *ps.p == '|')
			rc = fail(&ps, ps.p, "'%c' is not an operator: write '%c%c'", *ps.p, *ps.p,
				  *ps.p);
		else if (*ps.p == ')')
			rc = fail(&ps, ps.p, "')' without a matching '('");
		else if (*ps.p)
			rc = fail(&ps, ps.p, "expected && or || before '%.10s'", ps.p);
	}
	if (rc) {
		free(ps.r);
		return rc;
	}
	*out = ps.r;
	return 0;
}

void mfsq_rule_free(struct mfsq_rule *r)
{
	free(r);
}

const char *mfsq_rule_text(const struct mfsq_rule *r)
{
	return r ? r->text : NULL;
}

int mfsq_rule_trivial(const struct mfsq_rule *r)
{
	return r->n == 1 && r->code[0].kind == I_CONST && r->code[0].v == 1;
}

static uint64_t attr_of(const struct mfsq_msg *m, unsigned a, uint64_t now)
{
	switch (a) {
	case A_PRIO:
		return m->prio;
	case A_ENQ:
		return m->enqueuer;
	case A_SIZE:
		return m->len;
	case A_SHARD:
		return m->shard;
	case A_SEQ:
		return m->seq;
	case A_TAG:
		return m->tag;
	case A_ENQ_US:
		return m->enqueue_us;
	case A_DLV_US:
		return m->deliver_us;
	case A_EXP_US:
		return m->expire_us;
	case A_AGE:
		return now > m->enqueue_us ? now - m->enqueue_us : 0;
	case A_DELAYED:
		return !!(m->flags & MFSQ_MSG_DELAYED);
	default: /* A_BUFFERED */
		return !!(m->flags & MFSQ_MSG_BUFFERED);
	}
}

int mfsq_rule_match(const struct mfsq_rule *r, const struct mfsq_msg *m, uint64_t now)
{
	unsigned char st[RULE_INS_MAX];
	unsigned sp = 0;

	for (unsigned i = 0; i < r->n; i++) {
		const struct ins *in = &r->code[i];
		uint64_t x;
		int b = 0;

		switch (in->kind) {
		case I_CMP:
			x = attr_of(m, in->attr, now);
			switch (in->cmp) {
			case C_EQ:
				b = x == in->v;
				break;
			case C_NE:
				b = x != in->v;
				break;
			case C_LT:
				b = x < in->v;
				break;
			case C_LE:
				b = x <= in->v;
				break;
			case C_GT:
				b = x > in->v;
				break;
			default:
				b = x >= in->v;
				break;
			}
			st[sp++] = (unsigned char)b;
			break;
		case I_IN:
			x = attr_of(m, in->attr, now);
			for (unsigned k = 0; k < in->nvals && !b; k++)
				b = x == r->vals[in->v + k];
			st[sp++] = (unsigned char)b;
			break;
		case I_FLAG:
			st[sp++] = (unsigned char)attr_of(m, in->attr, now);
			break;
		case I_CONST:
			st[sp++] = (unsigned char)in->v;
			break;
		case I_NOT:
			st[sp - 1] = !st[sp - 1];
			break;
		case I_AND:
			sp--;
			st[sp - 1] = st[sp - 1] && st[sp];
			break;
		default: /* I_OR */
			sp--;
			st[sp - 1] = st[sp - 1] || st[sp];
			break;
		}
	}
	return st[0];
}

int mfsq_rule_check(const char *rule, char *why, size_t whylen)
{
	struct mfsq_rule *r;
	int rc = mfsq_rule_compile(rule, &r, why, whylen);

	mfsq_rule_free(r);
	return rc;
}
