#include <float.h>
#include <limits.h>
#include <stdio.h>
#include "configured.h"

int main(void)
{
    printf("configured char_signed=%d ldbl_mant_dig=%d\n",
           CONFIGURED_CHAR_SIGNED, CONFIGURED_LDBL_MANT_DIG);
    printf("runtime char_signed=%d ldbl_mant_dig=%d\n",
           CHAR_MIN < 0 ? 1 : 0, LDBL_MANT_DIG);
    return 0;
}
