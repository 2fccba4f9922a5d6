"""Reports: text (rich), JSON (versioned schema), self-contained HTML, JUnit and Prometheus exposition."""
