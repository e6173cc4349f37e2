def fixtures():
    return {}
