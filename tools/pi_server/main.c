/* mrc_pi_server: PI's P4Runtime server (its gRPC service and proto frontend, the same code
 * bf_switchd --p4rt-server embeds) on PI's dummy target, with tables and action profiles that
 * keep what is written (state_target.c) and optional cables for packet I/O (wire.c).
 *
 * Usage: mrc_pi_server [ADDRESS:PORT] [--wire UDP_PORT] [--link LOCAL:PEER_UDP:PEER_PORT]...
 * The address defaults to 0.0.0.0:9559.
 *
 * SIGINT and SIGTERM are taken by sigwait in the main thread, so the shutdown runs outside a
 * signal handler; they are blocked before the server's threads start so that those inherit
 * the mask.
 */

#include "wire.h"

#include <PI/proto/pi_server.h>

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

static int usage(const char *program, const char *problem) {
  fprintf(stderr,
          "%s: %s\nusage: %s [ADDRESS:PORT] [--wire UDP_PORT] "
          "[--link LOCAL:PEER_UDP:PEER_PORT]...\n",
          program, problem, program);
  return 2;
}

int main(int argc, char **argv) {
  const char *address = "0.0.0.0:9559";
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--wire") == 0 || strcmp(argv[i], "--link") == 0) {
      if (i + 1 == argc) return usage(argv[0], "an option lacks its value");
      int failed = argv[i][2] == 'w' ? wire_listen(argv[i + 1]) : wire_add_link(argv[i + 1]);
      if (failed) return usage(argv[0], argv[i + 1]);
      i++;
    } else if (argv[i][0] != '-' && i == 1) {
      address = argv[i];
    } else {
      return usage(argv[0], argv[i]);
    }
  }

  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, NULL);

  PIGrpcServerInit();
  PIGrpcServerRunAddr(address);
  if (wire_start() != 0) return usage(argv[0], "cannot start the wire's thread");
  printf("mrc_pi_server: serving P4Runtime on %s\n", address);
  fflush(stdout);

  int signal_number = 0;
  sigwait(&stop, &signal_number);
  PIGrpcServerForceShutdown(1);
  PIGrpcServerWait();
  PIGrpcServerCleanup();
  wire_report(stdout);
  return 0;
}
