"""What the tests and benchmarks build on: tiny and planted models, the planted-circuit benchmark,
the benchmarks' shared preamble and the faithfulness yardstick. Not the product's runtime."""
