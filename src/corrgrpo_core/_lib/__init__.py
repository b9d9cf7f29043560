"""Private helpers shared by the estimators."""
