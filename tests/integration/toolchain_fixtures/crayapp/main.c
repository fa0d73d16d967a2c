#include <stdio.h>

int crayapp_threads(void);

int main(void)
{
    printf("c_threads=%d\n", crayapp_threads());
    return 0;
}
