"""Reports: per-test records, JUnit XML (junit-xml), and the run's results directory."""
