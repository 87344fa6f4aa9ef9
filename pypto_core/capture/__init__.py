"""pypto_core.capture"""
