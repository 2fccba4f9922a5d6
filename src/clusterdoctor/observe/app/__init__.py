"""Application: Flink checkpoint statistics, Kafka consumer lag."""
