"""What each command returns, composed from the estimators (compose)."""
