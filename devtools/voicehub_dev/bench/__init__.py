"""`voicehub bench`: figures, not tests. Each section returns a nested dict of numbers."""
