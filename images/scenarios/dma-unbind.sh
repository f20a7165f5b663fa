# dma-unbind: the device offers a receive stream (the `stream` knob), so the
# driver keeps a DMA from the device running from its interrupt thread; then
# the unbind scenario, while it runs. No DMA may reach the buffer once the
# driver said it was freed, nor any after the binding ended.
check stream_offered device_sync '{"cmd":"set_knobs","stream":true}'
. /scenarios/unbind.sh
