"""voicehub's development tools: benchmarks (`bench`), the soak tool (`soak`), and the
protocol-faithful fakes (`fakes`) that the tests and the benchmarks share."""
