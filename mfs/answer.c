/* Answering control commands, and the refusals user.mfs.error serves (see
 * answer.h). */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <fuse_lowlevel.h>

#include "answer.h"
#include "log.h"

#define SLOTS 128

struct slot {
	uid_t uid;
	pid_t ppid;
	int err;
	unsigned long seq;
	char reason[256];
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct slot slots[SLOTS];
static unsigned long seq;

/* Remember that `who`'s command failed with errno `err` for `reason`. */
static void remember(const struct mfs_caller *who, int err, const char *reason)
{
	pthread_mutex_lock(&lock);
	struct slot *s = NULL, *oldest = &slots[0];
	for (int i = 0; i < SLOTS; i++) {
		if (slots[i].seq && slots[i].uid == who->uid && slots[i].ppid == who->ppid) {
			s = &slots[i];
			break;
		}
		if (slots[i].seq < oldest->seq)
			oldest = &slots[i];
	}
	if (!s)
		s = oldest;
	s->uid = who->uid;
	s->ppid = who->ppid;
	s->err = err;
	s->seq = ++seq;
	snprintf(s->reason, sizeof(s->reason), "%s", reason);
	pthread_mutex_unlock(&lock);
}

void mfs_answer_last_refusal(const struct mfs_caller *who, char *buf, size_t cap)
{
	struct slot *mine = NULL, *latest = NULL;

	pthread_mutex_lock(&lock);
	for (int i = 0; i < SLOTS; i++) {
		if (!slots[i].seq || slots[i].uid != who->uid)
			continue;
		if (slots[i].ppid == who->ppid)
			mine = &slots[i];
		if (!latest || slots[i].seq > latest->seq)
			latest = &slots[i];
	}
	struct slot *s = mine ? mine : latest;
	if (s) {
		const char *name = strerrorname_np(s->err);
		snprintf(buf, cap, "%s (%d): %s\n", name ? name : "E?", s->err, s->reason);
	} else {
		snprintf(buf, cap, "0: no refused command\n");
	}
	pthread_mutex_unlock(&lock);
}

void mfs_answer_refused(const struct mfs_caller *who, const char *attr, int rc, const char *reason)
{
	remember(who, -rc, reason);
	mfs_warn("refused %s from uid %u: %s", attr, (unsigned)who->uid, reason);
}

void mfs_answer_cmd(struct mfs_cmd *cmd, int rc, const char *reason)
{
	if (rc) {
		remember(&cmd->who, -rc, reason);
		mfs_warn("refused %s from uid %u: %s: %s", cmd->verb->name, (unsigned)cmd->who.uid,
			 strerror(-rc), reason);
	}
	if (cmd->req)
		fuse_reply_err(cmd->req, -rc);
}
