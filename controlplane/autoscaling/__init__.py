"""Predictive autoscaling (pure): warm-pool ladder, sizing from per-replica profiles, node pools
and GPU budgets, and the predictive / reactive / static policies that share one core."""
