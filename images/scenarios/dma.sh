# dma: the rebind scenario, whose every probe runs the driver's DMA self-test
# (a coherent buffer to the device and back, a streaming mapping the device
# sums); the host's DMA oracle holds every DMA in the device's own log against
# the mappings the driver reported live at that moment.
. /scenarios/rebind.sh
