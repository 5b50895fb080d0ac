"""One Prefect task per pipeline step; each is a thin shell over library code."""
