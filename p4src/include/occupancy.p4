/* Per-port queue occupancy, shared by ingress (trimming) and egress (writer).
 *
 * BMv2 shows queue depth only in egress, but priority can only be chosen in ingress, so egress
 * records the normal-priority queue's depth at dequeue here and ingress reads it for the port it
 * has chosen. Only normal-priority packets write: the short high-priority queue would drag the
 * value down, and the lossless RoCE queue is no measure of what MRC data waits behind;
 * deq_qdepth, not enq_qdepth, because enq_qdepth made trimming lock on after the queue had
 * drained (docs/bmv2.md). The value lags one dequeue, so a line-rate burst into an idle queue
 * can still overflow before trimming starts. */
#ifndef MRC_OCCUPANCY_P4
#define MRC_OCCUPANCY_P4

@name(".port_occupancy")
register<qdepth_t>(MAX_PORTS) port_occupancy;

#endif
