"""The MRC wire format: constants shared by the agent, the P4 program and the tests, and scapy layers."""
