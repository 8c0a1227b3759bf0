"""Protocol-faithful fakes of the services voicehub talks to, on real 127.0.0.1 sockets."""
