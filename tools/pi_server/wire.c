/* Cables between mrc_pi_server processes, for the control plane's packet I/O only.
 *
 * PI's dummy target has no ports: a packet-out goes nowhere and no packet-in ever comes, so a
 * controller that finds links by LLDP would see none. Here each server may own a UDP socket
 * on the loopback and a list of links: a packet-out whose egress port has a link is sent to
 * the peer server's socket, which hands it to its controller as a packet-in from the peer's
 * port. A test cuts and restores a link by sending a control datagram to both ends.
 *
 * The controller headers are those of mrc.p4 and its TNA program: two bytes, the port in the
 * top 9 bits, 7 bits of padding (packet_out.egress_port, packet_in.ingress_port).
 *
 * Datagrams: a frame is a 16-bit big-endian port (the receiver's ingress port) then the
 * Ethernet frame; a control datagram is 0xffff then "cut PORT" or "restore PORT".
 */

#include "wire.h"

#include <PI/pi.h>
#include <PI/target/pi_imp.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_PORTS 512
#define CONTROL 0xffffu
#define MAX_DATAGRAM 16384

typedef struct {
  int present;
  struct sockaddr_in peer;
  uint16_t peer_port;
} link_t;

static link_t links[MAX_PORTS];
static atomic_int cut[MAX_PORTS];
static int sock = -1;
static _Atomic int device = -1;
static atomic_ulong frames_sent, frames_received, frames_dropped;

int wire_listen(const char *udp_port) {
  char *end;
  long port = strtol(udp_port, &end, 10);
  if (*end || port <= 0 || port > 65535) return -1;
  sock = socket(AF_INET, SOCK_DGRAM, 0);
  if (sock < 0) return -1;
  struct sockaddr_in address = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return bind(sock, (struct sockaddr *)&address, sizeof(address));
}

/* LOCAL:PEER_UDP:PEER_PORT, all decimal. */
int wire_add_link(const char *spec) {
  unsigned local, udp, peer;
  char extra;
  if (sscanf(spec, "%u:%u:%u%c", &local, &udp, &peer, &extra) != 3) return -1;
  if (local >= MAX_PORTS || peer >= MAX_PORTS || udp == 0 || udp > 65535) return -1;
  links[local].present = 1;
  links[local].peer_port = (uint16_t)peer;
  links[local].peer.sin_family = AF_INET;
  links[local].peer.sin_port = htons((uint16_t)udp);
  links[local].peer.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return 0;
}

static void control(const char *text, size_t size) {
  char command[32];
  unsigned port;
  if (size >= sizeof(command)) return;
  memcpy(command, text, size);
  command[size] = '\0';
  if (sscanf(command, "cut %u", &port) == 1 && port < MAX_PORTS) atomic_store(&cut[port], 1);
  if (sscanf(command, "restore %u", &port) == 1 && port < MAX_PORTS) atomic_store(&cut[port], 0);
}

static void *receive(void *unused) {
  (void)unused;
  static char datagram[MAX_DATAGRAM];
  for (;;) {
    ssize_t size = recv(sock, datagram, sizeof(datagram), 0);
    if (size < 2) continue;
    unsigned port = ((unsigned char)datagram[0] << 8) | (unsigned char)datagram[1];
    if (port == CONTROL) {
      control(datagram + 2, (size_t)size - 2);
      continue;
    }
    int dev = atomic_load(&device);
    if (port >= MAX_PORTS || atomic_load(&cut[port]) || dev < 0) {
      atomic_fetch_add(&frames_dropped, 1);
      continue;
    }
    /* The packet_in header, written over the two bytes the port came in. */
    datagram[0] = (char)(port >> 1);
    datagram[1] = (char)((port & 1) << 7);
    if (pi_packetin_receive((pi_dev_id_t)dev, datagram, (size_t)size) == PI_STATUS_SUCCESS)
      atomic_fetch_add(&frames_received, 1);
    else
      atomic_fetch_add(&frames_dropped, 1);
  }
  return NULL;
}

int wire_start(void) {
  if (sock < 0) return 0;
  pthread_t thread;
  if (pthread_create(&thread, NULL, receive, NULL) != 0) return -1;
  return pthread_detach(thread);
}

void wire_report(FILE *out) {
  fprintf(out, "mrc_pi_server: frames sent %lu, received %lu, dropped %lu\n",
          atomic_load(&frames_sent), atomic_load(&frames_received),
          atomic_load(&frames_dropped));
}

pi_status_t _pi_assign_device(pi_dev_id_t dev_id, const pi_p4info_t *p4info,
                              pi_assign_extra_t *extra) {
  (void)p4info;
  (void)extra;
  atomic_store(&device, (int)dev_id);
  return PI_STATUS_SUCCESS;
}

pi_status_t _pi_packetout_send(pi_dev_id_t dev_id, const char *pkt, size_t size) {
  (void)dev_id;
  if (size < 2 || size - 2 > MAX_DATAGRAM - 2) return PI_STATUS_PACKETOUT_SEND_ERROR;
  unsigned port = ((unsigned char)pkt[0] << 1) | ((unsigned char)pkt[1] >> 7);
  const link_t *link = &links[port];
  if (sock < 0 || !link->present || atomic_load(&cut[port])) {
    atomic_fetch_add(&frames_dropped, 1);
    return PI_STATUS_SUCCESS; /* a port without a cable: the frame is lost, as on a switch */
  }
  char datagram[MAX_DATAGRAM];
  datagram[0] = (char)(link->peer_port >> 8);
  datagram[1] = (char)(link->peer_port & 0xff);
  memcpy(datagram + 2, pkt + 2, size - 2);
  if (sendto(sock, datagram, size, 0, (const struct sockaddr *)&link->peer,
             sizeof(link->peer)) < 0) {
    atomic_fetch_add(&frames_dropped, 1);
  } else {
    atomic_fetch_add(&frames_sent, 1);
  }
  return PI_STATUS_SUCCESS;
}
