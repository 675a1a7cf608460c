"""The REST API (django-ninja): the node knowledge routes of seed 001 and the run history."""
