"""Shared math the rules use: quantiles, rates, periodicity, correlation, interval unions, topology splits."""
