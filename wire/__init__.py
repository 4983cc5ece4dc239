"""The MRC wire format: constants shared by agent, P4 program and tests, scapy layers, frames."""
