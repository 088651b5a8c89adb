/* flock, POSIX fcntl and OFD locks between two processes. The processes
 * step in lock-step through pipes; every wait is bounded by poll(). */
#include "check.h"

#include <poll.h>
#include <signal.h>
#include <sys/file.h>

static int to_child[2], to_parent[2];

static void send_step(int fd, char c)
{
	CHECK_EQ(write(fd, &c, 1), 1);
}

/* Wait (at most 10 s) for the next step byte; fail on anything else. */
static void expect_step(int fd, char want)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	int n = poll(&p, 1, 10000);
	if (n == 0)
		fail("no step '%c' from the other process within 10 s", want);
	CHECK(n == 1);
	char c;
	CHECK_EQ(read(fd, &c, 1), 1);
	if (c != want)
		fail("got step '%c', expected '%c'", c, want);
}

/* Nothing must arrive on fd for a short while: used only to check that a
 * blocked lock is really blocked, never to let something happen. */
static int quiet(int fd, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	return poll(&p, 1, ms) == 0;
}

static int setlk(int fd, int cmd, short type, off_t start, off_t len)
{
	struct flock fl = { .l_type = type, .l_whence = SEEK_SET, .l_start = start, .l_len = len };
	return fcntl(fd, cmd, &fl);
}

static void child(void)
{
	int in = to_child[0], out = to_parent[1];
	int fd = open("lockfile", O_RDWR);
	CHECK(fd >= 0);

	/* flock: parent holds LOCK_EX. */
	expect_step(in, 'a');
	CHECK_ERR(flock(fd, LOCK_EX | LOCK_NB), EWOULDBLOCK);
	CHECK_ERR(flock(fd, LOCK_SH | LOCK_NB), EWOULDBLOCK);
	send_step(out, 'A');
	/* Parent downgraded to LOCK_SH. */
	expect_step(in, 'b');
	CHECK(flock(fd, LOCK_SH | LOCK_NB) == 0);
	CHECK(flock(fd, LOCK_UN) == 0);
	CHECK_ERR(flock(fd, LOCK_EX | LOCK_NB), EWOULDBLOCK);
	send_step(out, 'B');
	/* Blocking LOCK_EX: granted once the parent unlocks. */
	send_step(out, 'W');
	CHECK(flock(fd, LOCK_EX) == 0);
	send_step(out, 'G');
	expect_step(in, 'c');
	CHECK(flock(fd, LOCK_UN) == 0);
	send_step(out, 'C');

	/* fcntl: parent holds a write lock on [0, 100). */
	expect_step(in, 'd');
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 50, .l_len = 10 };
	CHECK(fcntl(fd, F_GETLK, &fl) == 0);
	CHECK_EQ(fl.l_type, F_WRLCK);
	CHECK_EQ(fl.l_pid, getppid());
	CHECK_EQ(fl.l_start, 0);
	CHECK_EQ(fl.l_len, 100);
	CHECK_ERR2(setlk(fd, F_SETLK, F_RDLCK, 99, 1), EAGAIN, EACCES);
	CHECK_ERR2(setlk(fd, F_SETLK, F_WRLCK, 0, 0), EAGAIN, EACCES);
	CHECK(setlk(fd, F_SETLK, F_WRLCK, 100, 100) == 0); /* adjacent range is free */
	fl = (struct flock){ .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 150, .l_len = 1 };
	CHECK(fcntl(fd, F_GETLK, &fl) == 0);
	CHECK_EQ(fl.l_type, F_UNLCK); /* own locks do not conflict */
	send_step(out, 'D');
	/* Blocking F_SETLKW waits for the parent's unlock. */
	send_step(out, 'X');
	CHECK(setlk(fd, F_SETLKW, F_WRLCK, 0, 100) == 0);
	send_step(out, 'Y');
	expect_step(in, 'e');
	/* Closing any descriptor of the file drops this process's POSIX locks. */
	int other = open("lockfile", O_RDONLY);
	CHECK(other >= 0);
	CHECK(close(other) == 0);
	send_step(out, 'E');

	/* OFD locks: parent holds a read lock on the whole file. */
	expect_step(in, 'f');
	CHECK(setlk(fd, F_OFD_SETLK, F_RDLCK, 0, 0) == 0);
	CHECK_ERR2(setlk(fd, F_OFD_SETLK, F_WRLCK, 0, 0), EAGAIN, EACCES);
	CHECK(setlk(fd, F_OFD_SETLK, F_UNLCK, 0, 0) == 0);
	send_step(out, 'F');
	CHECK(close(fd) == 0);
	_exit(0);
}

int main(int argc, char **argv)
{
	enter(argc, argv);
	write_file("lockfile", "0123456789", 10, 0666);
	CHECK(pipe(to_child) == 0 && pipe(to_parent) == 0);
	fflush(stdout);
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0)
		child();
	int in = to_parent[0], out = to_child[1];
	int fd = open("lockfile", O_RDWR);
	CHECK(fd >= 0);

	CHECK(flock(fd, LOCK_EX | LOCK_NB) == 0);
	send_step(out, 'a');
	expect_step(in, 'A');
	CHECK(flock(fd, LOCK_SH) == 0);
	send_step(out, 'b');
	expect_step(in, 'B');
	expect_step(in, 'W');
	/* The child is (about to be) blocked in flock: it must not get the lock. */
	CHECK(quiet(in, 300));
	CHECK(flock(fd, LOCK_UN) == 0);
	expect_step(in, 'G');
	CHECK_ERR(flock(fd, LOCK_SH | LOCK_NB), EWOULDBLOCK);
	send_step(out, 'c');
	expect_step(in, 'C');
	CHECK(flock(fd, LOCK_EX | LOCK_NB) == 0);
	CHECK(flock(fd, LOCK_UN) == 0);
	OK("flock between two processes");

	CHECK(setlk(fd, F_SETLK, F_WRLCK, 0, 100) == 0);
	send_step(out, 'd');
	expect_step(in, 'D');
	CHECK_ERR2(setlk(fd, F_SETLK, F_RDLCK, 100, 1), EAGAIN, EACCES);
	expect_step(in, 'X');
	CHECK(quiet(in, 300));
	CHECK(setlk(fd, F_SETLK, F_UNLCK, 0, 100) == 0);
	expect_step(in, 'Y');
	CHECK_ERR2(setlk(fd, F_SETLK, F_RDLCK, 10, 1), EAGAIN, EACCES);
	send_step(out, 'e');
	expect_step(in, 'E');
	CHECK(setlk(fd, F_SETLK, F_WRLCK, 0, 0) == 0);
	CHECK(setlk(fd, F_SETLK, F_UNLCK, 0, 0) == 0);
	OK("fcntl locks between two processes");

	CHECK(setlk(fd, F_OFD_SETLK, F_RDLCK, 0, 0) == 0);
	send_step(out, 'f');
	expect_step(in, 'F');
	CHECK(setlk(fd, F_OFD_SETLK, F_UNLCK, 0, 0) == 0);
	OK("OFD locks");

	int status;
	CHECK(waitpid(pid, &status, 0) == pid);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		fail("lock child failed (status 0x%x)", status);
	CHECK(close(fd) == 0);
	return 0;
}
