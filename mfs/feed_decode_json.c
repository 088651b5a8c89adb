/* Reading a JSON feed line back: a small strict JSON reader for exactly
 * the objects feed_json.c writes (see feed_line.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "feed_line_private.h"

struct js {
	const char *s;
	size_t n, i;
};

static void ws(struct js *j)
{
	while (j->i < j->n && (j->s[j->i] == ' ' || j->s[j->i] == '\t' || j->s[j->i] == '\r' ||
			       j->s[j->i] == '\n'))
		j->i++;
}

static bool eat(struct js *j, char c)
{
	ws(j);
	if (j->i < j->n && j->s[j->i] == c) {
		j->i++;
		return true;
	}
	return false;
}

static int hex4(const char *s, unsigned *v)
{
	*v = 0;
	for (int k = 0; k < 4; k++) {
		char c = s[k];
		unsigned d = c >= '0' && c <= '9'   ? (unsigned)(c - '0')
			     : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10)
			     : c >= 'A' && c <= 'F' ? (unsigned)(c - 'A' + 10)
						    : 16;
		if (d == 16)
			return -1;
		*v = *v << 4 | d;
	}
	return 0;
}

/* A JSON string at the cursor, decoded into w (NULL: only skipped); its
 * length in *outn. */
static int jstring(struct js *j, char *w, size_t *outn)
{
	size_t o = 0;

	if (!eat(j, '"'))
		return -EINVAL;
	size_t start = j->i;
	while (j->i < j->n && j->s[j->i] != '"') {
		unsigned char c = (unsigned char)j->s[j->i];
		if (c < 0x20)
			return -EINVAL;
		if (c != '\\') {
			size_t k = c < 0x80 ? 1 : 0;
			if (!k) {
				/* a raw multi-byte sequence must be valid UTF-8 */
				const unsigned char *p = (const unsigned char *)j->s + j->i;
				size_t left = j->n - j->i;
				k = mfs_feed_utf8_seq(p, left);
				if (!k && left >= 2 && p[0] == 0xc2 && p[1] >= 0x80 && p[1] < 0xa0)
					k = 2;
				if (!k)
					return -EINVAL;
			}
			if (w)
				memcpy(w + o, j->s + j->i, k);
			o += k;
			j->i += k;
			continue;
		}
		if (++j->i >= j->n)
			return -EINVAL;
		char e = j->s[j->i++];
		unsigned cp;
		const char *simple = strchr("\"\\/bfnrt", e);
		if (e && simple) {
			static const char to[] = "\"\\/\b\f\n\r\t";
			if (w)
				w[o] = to[simple - "\"\\/bfnrt"];
			o++;
			continue;
		}
		if (e != 'u' || j->n - j->i < 4 || hex4(j->s + j->i, &cp))
			return -EINVAL;
		j->i += 4;
		if (cp >= 0xdc00 && cp <= 0xdfff)
			return -EINVAL;
		if (cp >= 0xd800 && cp <= 0xdbff) {
			unsigned lo;
			if (j->n - j->i < 6 || j->s[j->i] != '\\' || j->s[j->i + 1] != 'u' ||
			    hex4(j->s + j->i + 2, &lo) || lo < 0xdc00 || lo > 0xdfff)
				return -EINVAL;
			j->i += 6;
			cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
		}
		char u[4];
		size_t un;
		if (cp < 0x80) {
			u[0] = (char)cp;
			un = 1;
		} else if (cp < 0x800) {
			u[0] = (char)(0xc0 | cp >> 6);
			u[1] = (char)(0x80 | (cp & 63));
			un = 2;
		} else if (cp < 0x10000) {
			u[0] = (char)(0xe0 | cp >> 12);
			u[1] = (char)(0x80 | ((cp >> 6) & 63));
			u[2] = (char)(0x80 | (cp & 63));
			un = 3;
		} else {
			u[0] = (char)(0xf0 | cp >> 18);
			u[1] = (char)(0x80 | ((cp >> 12) & 63));
			u[2] = (char)(0x80 | ((cp >> 6) & 63));
			u[3] = (char)(0x80 | (cp & 63));
			un = 4;
		}
		if (w)
			memcpy(w + o, u, un);
		o += un;
	}
	(void)start;
	if (j->i >= j->n)
		return -EINVAL;
	j->i++;
	if (outn)
		*outn = o;
	return 0;
}

static int jnumber(struct js *j, uint64_t *v)
{
	ws(j);
	size_t k = j->i;
	while (k < j->n && j->s[k] >= '0' && j->s[k] <= '9')
		k++;
	int rc = mfs_feed_number(j->s + j->i, k - j->i, UINT64_MAX, v);
	j->i = k;
	return rc;
}

/* Skip any JSON value (for keys of a later version), depth-bounded. */
static int jskip(struct js *j, int depth)
{
	ws(j);
	if (depth > 32 || j->i >= j->n)
		return -EINVAL;
	char c = j->s[j->i];
	if (c == '"')
		return jstring(j, NULL, NULL);
	if (c == '{' || c == '[') {
		char close = c == '{' ? '}' : ']';
		j->i++;
		if (eat(j, close))
			return 0;
		do {
			if (c == '{' && (jstring(j, NULL, NULL) || !eat(j, ':')))
				return -EINVAL;
			if (jskip(j, depth + 1))
				return -EINVAL;
		} while (eat(j, ','));
		return eat(j, close) ? 0 : -EINVAL;
	}
	static const char *const words[] = {"true", "false", "null"};
	for (int w = 0; w < 3; w++) {
		size_t wl = strlen(words[w]);
		if (j->n - j->i >= wl && !memcmp(j->s + j->i, words[w], wl)) {
			j->i += wl;
			return 0;
		}
	}
	/* a mfs_feed_number: -? int frac? exp? */
	size_t k = j->i;
	if (k < j->n && j->s[k] == '-')
		k++;
	size_t d = k;
	while (k < j->n && j->s[k] >= '0' && j->s[k] <= '9')
		k++;
	if (k == d || (k - d > 1 && j->s[d] == '0'))
		return -EINVAL;
	if (k < j->n && j->s[k] == '.') {
		size_t f = ++k;
		while (k < j->n && j->s[k] >= '0' && j->s[k] <= '9')
			k++;
		if (k == f)
			return -EINVAL;
	}
	if (k < j->n && (j->s[k] == 'e' || j->s[k] == 'E')) {
		k++;
		if (k < j->n && (j->s[k] == '+' || j->s[k] == '-'))
			k++;
		size_t e = k;
		while (k < j->n && j->s[k] >= '0' && j->s[k] <= '9')
			k++;
		if (k == e)
			return -EINVAL;
	}
	j->i = k;
	return 0;
}

/* Strict padded base64 of s (n bytes) into w; the length in *outn. */
static int unb64(const char *s, size_t n, char *w, size_t *outn)
{
	size_t o = 0;
	if (n % 4)
		return -EINVAL;
	for (size_t i = 0; i < n; i += 4) {
		unsigned v = 0;
		int pad = 0;
		for (int k = 0; k < 4; k++) {
			const char *p = s[i + k] ? strchr(mfs_feed_b64, s[i + k]) : NULL;
			if (s[i + k] == '=' && i + 4 == n && k >= 2 && (k == 3 || s[i + 3] == '=')) {
				pad++;
				v <<= 6;
				continue;
			}
			if (!p || pad)
				return -EINVAL;
			v = v << 6 | (unsigned)(p - mfs_feed_b64);
		}
		if ((pad == 1 && (v & 0xff)) || (pad == 2 && (v & 0xffff)))
			return -EINVAL; /* bits past the end must be zero */
		w[o++] = (char)(v >> 16);
		if (pad < 2)
			w[o++] = (char)(v >> 8);
		if (pad < 1)
			w[o++] = (char)v;
	}
	*outn = o;
	return 0;
}

int mfs_feed_parse_json(const char *line, size_t len, struct mfs_feed_rec *rec, char *err,
			size_t errlen)
{
	struct dbfs_event *ev = &rec->ev;
	struct js j = {line, len, 0};
	bool seen[K_N] = {false};
	uint32_t type = 0, perm = 0;
	uint64_t time_text = 0;
	/* each name field's bytes: plain and base64 */
	char *name[K_N] = {NULL};
	size_t name_len[K_N] = {0};

	memset(rec, 0, sizeof(*rec));
	rec->buf = malloc(6 * (len + 1));
	if (!rec->buf) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	char *w = rec->buf;
	if (!eat(&j, '{'))
		FAIL("not a JSON object");
	if (!eat(&j, '}')) {
		do {
			char key[32];
			size_t kn;
			struct js save = j;
			ws(&j);
			/* keys we know are short: decode into key[] only when short */
			if (jstring(&j, NULL, &kn))
				FAIL("bad key");
			int k = -1;
			if (kn < sizeof(key)) {
				j = save;
				jstring(&j, key, &kn);
				k = mfs_feed_key_of(key, kn);
			}
			if (!eat(&j, ':'))
				FAIL("no ':' after a key");
			if (k >= 0 && seen[k])
				FAIL("key %s twice", mfs_feed_key_names[k]);
			if (k >= 0)
				seen[k] = true;
			ws(&j);
			uint64_t x;
			size_t sn;
			switch (k) {
			case -1:
				if (jskip(&j, 0))
					FAIL("bad value");
				break;
			case K_OP:
			case K_TYPE:
			case K_MODE:
			case K_TIME: {
				char v[48];
				struct js s2 = j;
				if (jstring(&j, NULL, &sn) || sn >= sizeof(v))
					FAIL("bad %s", mfs_feed_key_names[k]);
				j = s2;
				jstring(&j, v, &sn);
				if (k == K_OP && !(ev->op = mfs_feed_op_of(v, sn)))
					FAIL("unknown operation");
				if (k == K_TYPE && mfs_feed_type_of(v, sn, &type))
					FAIL("bad type");
				if (k == K_MODE && mfs_feed_mode_of(v, sn, &perm))
					FAIL("bad mode");
				if (k == K_TIME && mfs_feed_time_parse(v, sn, &time_text))
					FAIL("bad time");
				break;
			}
			case K_ATTR:
			case K_FLAGS: {
				uint32_t *mask = k == K_ATTR ? &ev->attr_mask : &ev->flags;
				if (!eat(&j, '['))
					FAIL("%s is not an array", mfs_feed_key_names[k]);
				if (!eat(&j, ']')) {
					do {
						char v[48];
						struct js s2 = j;
						ws(&j);
						if (jstring(&j, NULL, &sn) || sn >= sizeof(v))
							FAIL("bad %s", mfs_feed_key_names[k]);
						j = s2;
						ws(&j);
						jstring(&j, v, &sn);
						uint32_t bit = k == K_ATTR ? mfs_feed_attr_of(v, sn)
									   : mfs_feed_flag_of(v, sn);
						if (!bit || (*mask & bit))
							FAIL("bad %s", mfs_feed_key_names[k]);
						*mask |= bit;
					} while (eat(&j, ','));
					if (!eat(&j, ']'))
						FAIL("bad %s", mfs_feed_key_names[k]);
				}
				break;
			}
			case K_PATH:
			case K_NEW_PATH:
			case K_XATTR:
				name[k] = w;
				if (jstring(&j, w, &name_len[k]))
					FAIL("bad %s", mfs_feed_key_names[k]);
				w += name_len[k];
				*w++ = '\0';
				break;
			case K_PATH_B64:
			case K_NEW_PATH_B64:
			case K_XATTR_B64: {
				char *raw = w + len + 1; /* scratch after this name's room */
				if (jstring(&j, raw, &sn) || unb64(raw, sn, w, &name_len[k]))
					FAIL("bad %s", mfs_feed_key_names[k]);
				name[k] = w;
				w += name_len[k];
				*w++ = '\0';
				w += len + 1;
				break;
			}
			default:
				if (jnumber(&j, &x) || mfs_feed_set_number(ev, k, x))
					FAIL("bad %s", mfs_feed_key_names[k]);
			}
		} while (eat(&j, ','));
		if (!eat(&j, '}'))
			FAIL("bad object");
	}
	ws(&j);
	if (j.i != j.n)
		FAIL("text after the object");
	if (!seen[K_SEQ] || !seen[K_OP] || (!seen[K_TIME] && !seen[K_TIME_NS]))
		FAIL("seq, op and time are needed");
	if (seen[K_TIME] && !seen[K_TIME_NS])
		ev->time_ns = time_text;
	if (seen[K_TIME] && seen[K_TIME_NS] && time_text != ev->time_ns)
		FAIL("time and time_ns differ");
	static const int pairs[3][2] = {
		{K_PATH, K_PATH_B64}, {K_NEW_PATH, K_NEW_PATH_B64}, {K_XATTR, K_XATTR_B64}};
	for (int p = 0; p < 3; p++)
		if (seen[pairs[p][1]]) {
			name[pairs[p][0]] = name[pairs[p][1]];
			name_len[pairs[p][0]] = name_len[pairs[p][1]];
		}
	if (name[K_PATH] || seen[K_PATH_B64]) {
		ev->path = name[K_PATH];
		ev->path_len = name_len[K_PATH];
	}
	if (name[K_NEW_PATH]) {
		if (!mfs_feed_op_has_new(ev->op))
			FAIL("new_path for %s", mfs_feed_op_name(ev->op));
		ev->new_path = name[K_NEW_PATH];
		ev->new_path_len = name_len[K_NEW_PATH];
	}
	if (name[K_XATTR]) {
		ev->xattr = name[K_XATTR];
		ev->xattr_len = name_len[K_XATTR];
	}
	ev->mode = type | perm;
	return 0;
bad:
	mfs_feed_rec_free(rec);
	return -EINVAL;
}
