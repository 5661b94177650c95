"""The decode runner: the K/V cache pool (`cache`, `slots`), the running batch (`batch`) and the loop that owns it
with the step in flight (`loop`), the static-shape step and its CUDA graphs (`static`), token choice and sampling
(`choice`), beam search (`beams`) and logit processors (`processors`) on the device, host transfers (`transfer`)."""
