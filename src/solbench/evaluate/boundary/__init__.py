"""What crosses the trust boundary between the trusted worker and a candidate's process: the shared arena, the ring of
timed-call slots, one call's arguments and result, and the messages each side accepts."""
