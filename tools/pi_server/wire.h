/* Cables between mrc_pi_server processes for packet I/O (wire.c). */
#pragma once

#include <stdio.h>

/* Binds the server's UDP socket on the loopback; 0 on success. */
int wire_listen(const char *udp_port);
/* Adds a link "LOCAL:PEER_UDP:PEER_PORT"; 0 on success. */
int wire_add_link(const char *spec);
/* Starts the thread that turns datagrams into packet-ins (nothing without wire_listen). */
int wire_start(void);
/* One line of frame counts. */
void wire_report(FILE *out);
