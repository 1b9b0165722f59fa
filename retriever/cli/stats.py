"""Small statistics shared by the report subcommands."""


def percentile(values, q):
    """Nearest-rank percentile (``q`` in 0..100) of ``values``; None for an
    empty list."""
    if not values:
        return None
    v = sorted(values)
    k = max(1, -(-len(v) * q // 100))  # ceil(n * q / 100), at least 1
    return v[int(min(k, len(v))) - 1]
