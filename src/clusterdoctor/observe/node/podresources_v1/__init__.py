"""Generated gRPC code for the kubelet pod-resources API v1 (see SOURCES.md). Import needs ``grpcio``."""
