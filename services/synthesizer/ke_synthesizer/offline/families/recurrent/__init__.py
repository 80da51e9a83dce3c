"""Recurrent layers (nn.LSTM / nn.GRU / nn.RNN) as a loop over time steps."""
