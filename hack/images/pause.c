/*
 * Minimal pod sandbox "pause" process for the nodeagent e2e rig.
 * Exits 0 on SIGINT/SIGTERM, reaps zombie children on SIGCHLD,
 * otherwise sleeps forever in pause().
 * Build: gcc -static -Os -o pause pause.c
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

static void sigdown(int signo) {
	(void)signo;
	_exit(0);
}

static void sigreap(int signo) {
	(void)signo;
	int saved = errno;
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
	errno = saved;
}

int main(int argc, char **argv) {
	if (argc > 1 && (strcmp(argv[1], "-v") == 0 || strcmp(argv[1], "--version") == 0)) {
		printf("pause (nodeagent rig)\n");
		return 0;
	}
	if (getpid() != 1)
		fprintf(stderr, "pause: warning: not running as PID 1\n");

	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sigemptyset(&sa.sa_mask);

	sa.sa_handler = sigdown;
	if (sigaction(SIGINT, &sa, NULL) < 0 || sigaction(SIGTERM, &sa, NULL) < 0) {
		perror("sigaction");
		return 1;
	}
	sa.sa_handler = sigreap;
	sa.sa_flags = SA_NOCLDSTOP | SA_RESTART;
	if (sigaction(SIGCHLD, &sa, NULL) < 0) {
		perror("sigaction");
		return 2;
	}

	for (;;)
		pause();
	/* not reached */
	return 42;
}
