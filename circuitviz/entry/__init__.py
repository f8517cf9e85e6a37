"""Entry points: one request settled where it enters, its price and limits, and the calls the
command line, the app and the benchmarks share."""
