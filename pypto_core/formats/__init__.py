"""pypto_core.formats"""
