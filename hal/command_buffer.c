#include "hal/command_buffer.h"

#include <stdlib.h>
#include <string.h>

void halo_hal_recording_deinitialize(halo_hal_recording_t *recording) {
  free(recording->commands);
  free(recording->args);
  free(recording->data);
  memset(recording, 0, sizeof(*recording));
}
