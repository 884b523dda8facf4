"""A run as a whole, above the stages it orchestrates: the config → `Plan` (`planner`, with a
user's builder checked in `custom`), the run's lock (`locks`) and local worker processes
(`workers`), the warm start from the archive (`reuse`), the time prediction before anything is
trained (`predict`), and the finalisation that judges and writes (`assemble`)."""
