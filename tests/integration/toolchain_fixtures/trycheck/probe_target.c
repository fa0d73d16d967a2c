#include <float.h>
#include <limits.h>
#include <stdio.h>

int main(void)
{
    printf("char_signed=%d\n", CHAR_MIN < 0 ? 1 : 0);
    printf("ldbl_mant_dig=%d\n", LDBL_MANT_DIG);
    return 0;
}
