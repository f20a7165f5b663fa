# dma-unbind: the device offers a receive stream (the `stream` knob), so the
# driver keeps a DMA from the device running from its interrupt thread; then
# the unbind scenario, while it runs. No DMA may reach the buffer once the
# driver said it was freed, nor any after the binding ended.
# Each DMA runs 100 ms after its doorbell; the unbind waits for a fresh one of
# 1 s to be in flight (unbind.sh): remove() meets it every time. The device finishes
# it before it takes remove()'s first write, and the DMA oracle holds it to
# the mappings live then.
check stream_offered device_sync '{"cmd":"set_knobs","stream":true,"dma_delay_us":100000}'
UNBIND_DURING_DMA=1
. /scenarios/unbind.sh
