"""pypto_core.remedies"""
