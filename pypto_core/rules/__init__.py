"""pypto_core.rules"""
