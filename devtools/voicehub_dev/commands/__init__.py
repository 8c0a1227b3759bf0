"""`voicehub bench` and `voicehub soak`, added to the `voicehub` command by entry point."""
