"""Code a user brings, outside shoal/: networks, recipes, envs and worlds the tests train."""
